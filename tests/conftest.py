import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

# advisor calibrate's store: a private one, so a calibration of this machine never changes a test;
# one per test process (the xdist workers import this too), removed when that process ends
os.environ["ADVISOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="advisor-cache-")
atexit.register(shutil.rmtree, os.environ["ADVISOR_CACHE_DIR"], True)

# XLA's CPU backend compiles the tests' programs with LLVM at -O0: compiling is about half of the
# suite's time, and -O0 halves it (the tiny Transformer's step: 8.6 -> 4.2 s here). The optimized
# HLO, buffer assignment and memory analysis are XLA's, not LLVM's, and stay byte for byte the same
# (checked on the tiny Transformer's step); only the ops' own speed changes. The few recordings
# whose findings are judged on measured op or step times set XLA_FLAGS="" (XLA's default codegen).
# Every process a test starts inherits it (TEST_XLA_FLAGS for tests that set XLA_FLAGS
# themselves). Set ADVISOR_TEST_XLA_OPT=1 to test with XLA's default optimization.
TEST_XLA_FLAGS = ("" if os.environ.get("ADVISOR_TEST_XLA_OPT") == "1"
                  else "--xla_backend_optimization_level=0")
if TEST_XLA_FLAGS and TEST_XLA_FLAGS not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {TEST_XLA_FLAGS}".strip()

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
GPU_TRACES = FIXTURES / "gpu-traces"      # real GPU profiles copied from others (see its README)


def pytest_addoption(parser):
    parser.addoption("--slow", action="store_true",
                     help="also run the tests marked slow: the end-to-end runs of many processes or devices "
                          "(CI runs them: .ci/run)")


# The modules that take longest (CPU seconds: benchmarks/suite_profile.py), handed to the xdist workers first: one
# of them last would leave the other worker idle at the end (verify_preflight_sweep, ~50 s, was). On 2026-11-28
# (-n0, --slow): snapshots 183, verify_preflight_sweep 180, parallel_workloads 148, entry_check 134 (a spinning
# neighbour for most of its 85 s), check_compare 53, parallel_tensor 45, rules_on_plain_programs 33, fuzz 32.
FIRST = ("test_snapshots", "test_verify_preflight_sweep", "test_parallel_workloads", "test_entry_check",
         "test_check_compare", "test_parallel_tensor", "test_rules_on_plain_programs", "test_fuzz",
         "test_checked_advice", "test_workloads", "test_fleet")


def pytest_collection_modifyitems(config, items):
    """Without --slow, the tests marked slow are deselected (and counted as such); the longest modules
    first (a stable sort: each module's tests keep their order)."""
    if not config.getoption("--slow"):
        slow = [item for item in items if item.get_closest_marker("slow")]
        if slow:
            items[:] = [item for item in items if not item.get_closest_marker("slow")]
            config.hook.pytest_deselected(items=slow)
    rank = {name: i for i, name in enumerate(FIRST)}
    items.sort(key=lambda item: rank.get(item.module.__name__ if item.module else "", len(FIRST)))


def pytest_configure(config):
    """The compilation cache of the workloads the tests run (advisor.compile_cache) in a folder of
    this test session, removed at its end: never the user's ~/.cache. The xdist workers (and every
    process a test starts) inherit it, so a configuration several tests record compiles once."""
    import atexit
    import os
    import tempfile

    if os.environ.get("ADVISOR_TEST_CACHE_ROOT"):      # a worker: the session's folder, from its controller
        return
    folder = tempfile.mkdtemp(prefix="advisor-test-cache-")
    os.environ["ADVISOR_TEST_CACHE_ROOT"] = os.environ["XDG_CACHE_HOME"] = folder
    atexit.register(shutil.rmtree, folder, True)


# The paired timing engine at the least that still runs all of it (the fixture least_timing says why).
LEAST_TIMING = {"MAX_ROUNDS": "MIN_ROUNDS", "MIN_ROUND_STEPS": 1, "ROUND_MS": 0.0}


def advisor(*args, cwd=None, timeout=600, env=None, least_timing=False):
    """Run the installed `advisor` command as a user would; returns the CompletedProcess.
    least_timing: with the paired timing engine's knobs set as the fixture least_timing sets them."""
    import os
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")}
    full_env.update(env or {})
    command = ["-m", "advisor.cli"]
    if least_timing:
        knobs = "; ".join(f"timing.{k} = {'timing.' + v if isinstance(v, str) else v}" for k, v in LEAST_TIMING.items())
        command = ["-c", f"import sys; from advisor import timing; {knobs}; sys.argv[0] = 'advisor'; "
                         "from advisor.cli import main; main()"]
    return subprocess.run([sys.executable, *command, *map(str, args)],
                          capture_output=True, text=True, cwd=cwd, timeout=timeout, env=full_env)


def cli(*args, cwd=None, env=None):
    """The `advisor` command run in this process through click, as `advisor()` runs it in a child:
    returns an object with returncode, stdout and stderr. For tests of what a command does; keep
    `advisor()` for the few tests of the installed command itself."""
    import os
    import subprocess

    from click.testing import CliRunner

    from advisor.cli import main

    before = Path.cwd()
    try:
        if cwd is not None:
            os.chdir(cwd)
        # as advisor() does: no CI variables from the environment the tests run in
        full_env = {k: None for k in os.environ if k.startswith("GITHUB_")}
        full_env.update(env or {})
        result = CliRunner().invoke(main, [str(a) for a in args], env=full_env)
    finally:
        os.chdir(before)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return subprocess.CompletedProcess(args, result.exit_code, result.stdout, result.stderr)


_ANALYZED: dict = {}


def analyze_json(path, *extra):
    """`advisor analyze PATH --format json` run in this process through click (no interpreter start-up
    per call); results for the committed fixtures are cached for the session, each caller gets a copy."""
    from click.testing import CliRunner

    from advisor.cli import main

    path = Path(path).resolve()
    key = (str(path), tuple(map(str, extra)))
    cached = key in _ANALYZED
    if not cached:
        result = CliRunner().invoke(main, ["analyze", str(path), "--format", "json", *map(str, extra)])
        assert result.exit_code == 0, (result.stderr, result.exception)
        if not path.is_relative_to(FIXTURES):
            return json.loads(result.stdout)
        _ANALYZED[key] = result.stdout
    return json.loads(_ANALYZED[key])


@pytest.fixture(scope="session")
def loaded_profile():
    """loaded_profile(name_or_path) -> list[Analysis]: engine.analyze_path on a fixture folder
    (a name under fixtures/, e.g. "transformer_scan") or any path, loaded once per session.
    The Analysis objects are shared: read them, do not change them."""
    from advisor.engine import analyze_path

    cache = {}

    def load(name_or_path):
        path = Path(name_or_path)
        path = (path if path.exists() else FIXTURES / path).resolve()
        if path not in cache:
            cache[path] = analyze_path(path)
        return cache[path]
    return load


@pytest.fixture
def least_timing(monkeypatch):
    """The paired timing engine (advisor/timing.py) at the least that still runs all of it: both sides'
    worker processes, MIN_ROUNDS interleaved rounds over every pair of them, and no more, of one step a
    side. For tests of what a command does with a paired measurement, not of how precise it is
    (benchmarks/verify_noise.py measures that; tests/test_check_compare.py tests adding rounds). At
    XLA's -O0 the tiny Transformer's step takes 0.6 to 0.9 s on one thread: the defaults (up to 24
    rounds of 2 steps a side) took 80 s a change."""
    from advisor import timing

    for name, value in LEAST_TIMING.items():
        monkeypatch.setattr(timing, name, getattr(timing, value) if isinstance(value, str) else value)


def rule_ids(doc, run=0):
    return {f["rule"] for f in doc["runs"][run]["findings"]}


@pytest.fixture(scope="session")
def fixture_copy(tmp_path_factory):
    """A private copy of a committed fixture, so tests never touch the repository's files."""
    def copy(name):
        dst = tmp_path_factory.mktemp("fx") / name
        shutil.copytree(FIXTURES / name, dst)
        return dst
    return copy
