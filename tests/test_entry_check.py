"""`advisor check --entry FILE.py:FUNCTION`: the user's own training step, loaded by path in child
processes, profiled for findings and memory, and timed against the base branch's checkout.

The slow tests run docs/advisor-check.yml's `advisor check` step exactly, on tests/entry_project/
(a Flax MLP trained with optax) copied as a pull request's head and its base, beside a busy core:
unchanged it passes; with one more hidden layer (EXTRA_LAYERS = 1) it fails on step time (the
check's own paired rounds judge it: no timed assertion here) and on peak memory."""

import contextlib
import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import ROOT, cli

PROJECT = ROOT / "tests" / "entry_project"


# --- loading the user's file ---------------------------------------------------------------------


def test_entry_forms_and_their_bad_input(tmp_path):
    from advisor import entry

    assert entry.split("dir/train.py:make_step") == ("dir/train.py", "make_step")
    assert entry.split("pkg.train:make_step") == ("pkg.train", "make_step")
    for bad in ("train.py", "train.py:", ":make_step", "train.py:make-step"):
        with pytest.raises(entry.EntryError, match="FILE.py:FUNCTION or module:function"):
            entry.split(bad)
    with pytest.raises(entry.EntryError, match="no such file"):
        entry.spec("missing.py:make_step", tmp_path)
    s = entry.spec("train.py:make_step", PROJECT)
    assert s == {"entry": f"{PROJECT / 'train.py'}:make_step", "cwd": str(PROJECT), "name": "train.py:make_step"}
    assert entry.spec("pkg.train:make_step", tmp_path)["entry"] == "pkg.train:make_step"


@pytest.fixture
def isolated_imports(monkeypatch, tmp_path):
    """sys.path as it was after the test, and the test's own modules forgotten: loading a file
    changes both."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    yield
    for name, module in list(sys.modules.items()):
        if name.startswith("_advisor_entry_") or str(getattr(module, "__file__", "")).startswith(str(tmp_path)):
            del sys.modules[name]


def _write(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(text)
    return folder / name


def test_a_file_is_loaded_by_path_its_folder_after_the_installation(tmp_path, isolated_imports):
    """The file's siblings are importable (its folder appended to sys.path), but a sibling named like
    a library (json.py) never hides it."""
    from advisor import entry

    _write(tmp_path, "json.py", "raise RuntimeError('the folder hid the standard library')\n")
    _write(tmp_path, "sizes.py", "WIDTH = 7\n")
    f = _write(tmp_path, "train.py", "import json\nfrom sizes import WIDTH\n"
                                     "def make_step():\n    return lambda: json.dumps(WIDTH)\n")
    step = entry.build(f"{f}:make_step")
    assert step() == "7"
    assert sys.path[-1] == str(tmp_path) and str(tmp_path) not in sys.path[:-1]


@pytest.mark.parametrize("body, words", [
    ("def other():\n    pass\n", "no function make_step in"),
    ("make_step = 3\n", "make_step is a int, not a function"),
    ("def make_step():\n    raise ValueError('no data at data/train.npy')\n",
     "calling make_step() raised ValueError: no data at data/train.npy"),
    ("def make_step():\n    return 3\n", "make_step() returned a int; it must return a callable"),
    ("import not_a_module_anywhere\n", "importing train.py raised ModuleNotFoundError"),
])
def test_bad_entries_are_one_sentence(tmp_path, isolated_imports, body, words):
    from advisor import entry

    f = _write(tmp_path, "train.py", body)
    with pytest.raises(entry.EntryError, match=words.replace("(", r"\(").replace(")", r"\)")):
        entry.build(f"{f}:make_step")


def test_step_and_args_run_on_a_fresh_copy_each_call(tmp_path, isolated_imports):
    """advisor.verify's shape, (step, args): a donating step deletes its inputs; each call copies them."""
    from advisor import entry

    f = _write(tmp_path, "train.py", "import jax, jax.numpy as jnp\n"
                                     "def make_step(scale=2.0):\n"
                                     "    step = jax.jit(lambda x: x * scale, donate_argnums=0)\n"
                                     "    return step, (jnp.ones(4),)\n")
    step = entry.build(f"{f}:make_step", {"scale": 3.0})
    assert float(step()[0]) == 3.0 and float(step()[0]) == 3.0


def test_check_entry_bad_input_is_one_line_exit_2(tmp_path):
    shutil.copytree(PROJECT, tmp_path / "head")
    head = tmp_path / "head"
    cases = [
        (["--entry", "missing.py:make_step", "--write-baseline", "b.json"], "no such file"),
        (["--entry", "train.py:make_stepp", "--write-baseline", "b.json"], "no function make_stepp"),
        (["--base-dir", "..", "--workload", "mlp", "--write-baseline", "b.json"], "give --entry too"),
        (["--entry", "train.py:make_step", "--base-dir", "../nowhere"], "no such folder"),
        (["--entry", "train:make_step", "--base-dir", "."], "give --base-python"),
        (["--entry", "train.py:make_step", "--workload", "mlp", "--write-baseline", "b.json"], "give one of"),
    ]
    for args, words in cases:
        proc = cli("check", *args, cwd=head)
        lines = [x for x in proc.stderr.splitlines() if x.startswith("advisor: error: ")]
        assert proc.returncode == 2 and len(lines) == 1 and words in lines[0], (args, proc.stderr)
        assert "Traceback" not in proc.stderr
    assert not (head / "b.json").exists()


# --- the workflow's check on the example project, beside a busy core -------------------------------


def _workflow_check() -> tuple[str, list[str]]:
    """docs/advisor-check.yml's `advisor check` step: (its working directory, its arguments after
    `.venv/bin/advisor`)."""
    doc = yaml.safe_load((ROOT / "docs" / "advisor-check.yml").read_text(encoding="utf-8"))
    (step,) = [s for s in doc["jobs"]["advisor"]["steps"] if s.get("name") == "advisor check"]
    words = shlex.split(step["run"])
    assert words[0] == ".venv/bin/advisor"
    return step["working-directory"], words[1:]


def _pull_request(tmp_path: Path, extra_layers: int) -> Path:
    """The job's two checkouts, base/ and head/, each with its venv (this interpreter's, linked: the
    workflow's install step, without the network)."""
    venv = Path(sys.executable).parent.parent
    for side in ("base", "head"):
        shutil.copytree(PROJECT, tmp_path / side, ignore=shutil.ignore_patterns("__pycache__"))
        (tmp_path / side / ".venv").symlink_to(venv, target_is_directory=True)
    train = tmp_path / "head" / "train.py"
    train.write_text(train.read_text().replace("EXTRA_LAYERS = 0", f"EXTRA_LAYERS = {extra_layers}"))
    return tmp_path


@contextlib.contextmanager
def busy_core():
    """One neighbour process that keeps a core busy for as long as the block runs."""
    proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.slow
def test_the_workflow_passes_an_unchanged_model_beside_a_busy_core(tmp_path):
    where, args = _workflow_check()
    root = _pull_request(tmp_path, extra_layers=0)
    with busy_core():
        proc = cli(*args, cwd=root / where)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "pass  budget:step-time: step time x" in proc.stdout
    assert "pass  budget:peak-memory" in proc.stdout
    assert (root / where / "advisor-junit.xml").is_file() and (root / where / "advisor.sarif").is_file()


@pytest.mark.slow
def test_the_workflow_fails_a_model_made_1_3_times_slower_beside_a_busy_core(tmp_path):
    where, args = _workflow_check()
    root = _pull_request(tmp_path, extra_layers=1)
    with busy_core():
        proc = cli(*args, "--format", "json", cwd=root / where)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    check = json.loads(proc.stdout)["check"]
    failed = {c["name"] for c in check["checks"] if not c["passed"]}
    assert {"budget:step-time", "budget:peak-memory"} <= failed
    assert check["step_time"]["method"] == "interleaved"
    # both sides' profiled runs, for the ops that changed between them
    assert check["run"]["summary"]["run"]["entry"].endswith("head/train.py:make_step")
    assert check["base_run"]["summary"]["run"]["entry"].endswith("base/train.py:make_step")
    assert check["comparison"]["base"]["peak_memory_bytes"] < check["comparison"]["new"]["peak_memory_bytes"]
    # the failing checks name the op that grew and its line in the user's file (issue 38's op diff)
    grown = [c for c in check["checks"] if c["name"] in ("budget:step-time", "budget:peak-memory")]
    assert all("the op that grew most" in c["message"] for c in grown), grown
    assert any((c["source"] or "").startswith("train.py:") or "train.py:" in (c["source"] or "") for c in grown), grown


@pytest.mark.slow
def test_verify_times_a_change_on_the_users_code(isolated_imports):
    """advisor.verify(make_step, changes, time=True): compiled, then timed in paired rounds by workers
    that load make_step from its file; one more hidden layer measures slower (its band above 1)."""
    import advisor
    from advisor import entry

    make_variant = entry.load(f"{PROJECT / 'train.py'}:make_variant")
    (check,) = advisor.verify(make_variant, [{"extra_layers": 1}], time=True)
    assert check.bytes > check.base_bytes
    t = check.step_time
    assert t["method"] == "interleaved" and t["rounds"] >= 8 and t["band"][0] > 1.0, t
    assert "step time x" in check.text and check.to_json()["checked"] == "measured"


def test_verify_time_refuses_a_step_it_cannot_load_from_a_file():
    import advisor
    from advisor.errors import AdvisorError

    def make_step():
        return (lambda x: x), (1.0,)
    with pytest.raises(AdvisorError, match="define it at the top of a .py file"):
        advisor.verify(make_step, [{}], time=True)
