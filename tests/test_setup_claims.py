"""What the README and docs claim about setting up advisor matches what is built and tested."""

import configparser
import re
import sys

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
