"""What the README and docs claim about setting up advisor matches what is built and tested."""

import configparser
import re
import sys
from pathlib import Path

import pytest

from conftest import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "docs" / "advisor-check.yml"]


def test_the_python_version_claimed_is_the_one_required_and_tested():
    """README's Python version is setup.cfg's python_requires, at least what the JAX installed here
    (the one tested) requires, and no newer than the interpreter the suite runs on."""
    from importlib import metadata

    claim = re.search(r"^Python (\d+\.\d+)\b", (ROOT / "README.md").read_text(encoding="utf-8"), re.M)
    assert claim, "README's set-up section names the Python version"
    version = tuple(map(int, claim.group(1).split(".")))
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    assert cfg["options"]["python_requires"] == f">={claim.group(1)}"
    for dist in ("jax", "jaxlib", "flax"):
        needs = re.search(r">=\s*(\d+)\.(\d+)", metadata.metadata(dist)["Requires-Python"] or ">=0.0")
        assert version >= (int(needs.group(1)), int(needs.group(2))), f"{dist} needs Python {needs.group(0)}"
    assert sys.version_info[:2] >= version


def test_install_commands_are_from_the_clone():
    """advisor is not published: an extra is installed from the clone (pip install -e ".[tensorboard]"),
    never as `pip install "jax-advisor[...]"`, in the docs or in what advisor prints."""
    sources = [*PAGES, *ROOT.joinpath("advisor").rglob("*.py"), *ROOT.joinpath("benchmarks").glob("*.py")]
    offenders = [f"{p.relative_to(ROOT)}:{n}" for p in sources
                 for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if "jax-advisor[" in line]
    assert offenders == []
    assert 'pip install -e ".[tensorboard]"' in (ROOT / "docs" / "tensorboard.md").read_text(encoding="utf-8")


@pytest.mark.slow
def test_python_m_advisor_in_the_clone_root_works_with_a_plain_install(tmp_path):
    """A plain (non-editable) install, then `python -m advisor` in the clone's root: the clone's advisor/
    shadows the installed package, and its rules/ and workloads/ stand beside it (setup.cfg maps them
    into advisor): advisor.clone_folders finds them there. It failed with "cannot import name 'rules'"."""
    import subprocess

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    # the dependencies are this interpreter's; advisor itself is installed into the venv, as a wheel would
    (Path(site) / "deps.pth").write_text("".join(f"{p}\n" for p in sys.path if p.endswith("-packages")))
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                    "--target", site, str(ROOT)], check=True, capture_output=True)
    assert (Path(site) / "advisor" / "rules" / "__init__.py").is_file()      # a plain install: rules inside
    proc = subprocess.run([python, "-m", "advisor", "rules", "--format", "json"], cwd=ROOT,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert '"missing-remat"' in proc.stdout


def test_the_clone_finder_answers_only_for_the_mapped_packages():
    from advisor import clone_folders

    finder = clone_folders._CloneFolders(ROOT)
    assert Path(finder.find_spec("advisor.rules", None).origin) == ROOT / "rules" / "__init__.py"
    assert Path(finder.find_spec("advisor.workloads", None).origin) == ROOT / "workloads" / "__init__.py"
    assert finder.find_spec("advisor.tests", None) is None and finder.find_spec("rules", None) is None
