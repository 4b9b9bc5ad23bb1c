"""Stopped advisor leaves nothing behind: Ctrl-C and SIGTERM end it with 128+N and one line, its
temporary folders removed; the folders of a run killed outright are swept at the next start."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import FIXTURES

SCAN = FIXTURES / "transformer_scan"


# The child's SIGINT disposition is set, not inherited: started as a background job (`pytest &` in a
# shell without job control), the suite and every child would ignore SIGINT, as POSIX tools do.
_WITH_SIGINT = ("import os, signal, sys; signal.signal(signal.SIGINT, getattr(signal, sys.argv[1])); "
                "os.execv(sys.executable, [sys.executable, '-m', 'advisor', *sys.argv[2:]])")


def _start(*args, tmp: Path, sigint: str = "SIG_DFL", **kw) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")}
    env["TMPDIR"] = str(tmp)
    streams = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, **kw}
    return subprocess.Popen([sys.executable, "-c", _WITH_SIGINT, sigint, *map(str, args)], env=env, text=True,
                            **streams)


@pytest.fixture
def sigint_ignored_here():
    """This process ignores SIGINT while the test starts its children, as a suite started by
    `pytest &` from a script does: what a child inherits must not decide the test."""
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    yield
    signal.signal(signal.SIGINT, before)


def _leftovers(tmp: Path) -> list[str]:
    return sorted(p.name for p in tmp.iterdir() if p.name.startswith("advisor-"))


def test_ctrl_c_while_run_workload_compiles_exits_130_and_leaves_nothing(tmp_path, sigint_ignored_here):
    """JAX's callbacks swallowed the KeyboardInterrupt (the run went on) or crashed on it (exit 139).
    A fresh-clone `.ci/run` started as a background job went red here: the child kept the SIGINT
    ignore it inherited."""
    tmp, logdir = tmp_path / "tmp", tmp_path / "logs"
    tmp.mkdir()
    proc = _start("run-workload", "transformer", "--preset", "tiny", "--logdir", logdir, tmp=tmp)
    for line in proc.stderr:
        if "compiling" in line:
            break
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert err.strip().splitlines()[-1] == "advisor: interrupted" and "Traceback" not in err
    assert not [p for p in logdir.rglob("*") if p.is_file()] and not _leftovers(tmp)


def test_sigterm_during_analysis_removes_the_xprof_folder(tmp_path):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    proc = _start("analyze", SCAN, "--jobs", "1", tmp=tmp)
    deadline = time.monotonic() + 60
    while not _leftovers(tmp) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    if proc.poll() is not None:
        pytest.skip("the analysis ended before its xprof folder was seen")
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM
    assert not _leftovers(tmp)


def test_folders_of_killed_runs_are_swept_at_start(tmp_path):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()
    stale, fresh, alive = (tmp / f"advisor-xprof-{dead}-a", tmp / f"advisor-fetch-{dead}-b",
                           tmp / f"advisor-xprof-{os.getpid()}-c")
    for folder in (stale, fresh, alive):
        folder.mkdir()
        (folder / "vm.xplane.pb").write_bytes(b"x")
    old = time.time() - 3600
    for folder in (stale, alive):
        os.utime(folder, (old, old))
    proc = _start("rules", tmp=tmp)
    proc.communicate(timeout=60)
    assert proc.returncode == 0
    # the dead run's old folder goes; one that recent (a shared /tmp: maybe another machine's) and a
    # live process's stay
    assert _leftovers(tmp) == sorted([fresh.name, alive.name])


def test_ctrl_c_inside_advisor_trace_stops_the_profiler_and_removes_the_partial_trace(tmp_path):
    import jax
    import jax.numpy as jnp

    import advisor
    with pytest.raises(KeyboardInterrupt):
        with advisor.trace(tmp_path) as t:
            with t.step():
                jnp.ones(8).sum().block_until_ready()
            raise KeyboardInterrupt
    assert not list(tmp_path.rglob("*.xplane.pb")) and not list(tmp_path.glob(".advisor-tracing-*"))
    assert "interrupted" in t.error
    jax.profiler.start_trace(str(tmp_path / "again"))    # the profiler was stopped: it starts again
    jax.profiler.stop_trace()


def test_advisor_says_when_it_starts_with_sigint_ignored(tmp_path):
    """Ctrl-C cannot stop a process that ignores SIGINT; advisor keeps the ignore (as POSIX tools do)
    and says so on a terminal, with the way to stop it."""
    import pty

    for disposition, says in (("SIG_IGN", True), ("SIG_DFL", False)):
        leader, follower = pty.openpty()
        proc = _start("rules", tmp=tmp_path, sigint=disposition, stderr=follower)
        os.close(follower)
        proc.communicate(timeout=60)
        err = b""
        try:
            while chunk := os.read(leader, 65536):
                err += chunk
        except OSError:      # the terminal's other end closed
            pass
        os.close(leader)
        assert proc.returncode == 0
        note = [line for line in err.decode().splitlines() if "ignores SIGINT" in line]
        assert bool(note) == says, err
        if says:
            assert "Ctrl-C will not stop it" in note[0] and f"kill {proc.pid}" in note[0]


def test_serve_says_what_stops_it(tmp_path):
    """Started ignoring SIGINT, serve said "(Ctrl-C stops)" right under the note that Ctrl-C will not
    stop it: the way it names is the one that works."""
    import pty
    import shutil

    logdir = tmp_path / "logdir" / "plugins" / "profile"
    logdir.mkdir(parents=True)
    shutil.copytree(next((SCAN / "plugins" / "profile").iterdir()), logdir / "run")
    for disposition in ("SIG_IGN", "SIG_DFL"):
        leader, follower = pty.openpty()
        proc = _start("serve", tmp_path / "logdir", "--port", "0", tmp=tmp_path, sigint=disposition, stderr=follower)
        os.close(follower)
        err = b""
        try:
            while b"advisor: serving" not in err or not err.endswith(b"\n"):
                chunk = os.read(leader, 65536)
                assert chunk, err
                err += chunk
        finally:
            proc.terminate()
            proc.communicate(timeout=60)
            os.close(leader)
        serving = next(line for line in err.decode().splitlines() if "advisor: serving" in line)
        if disposition == "SIG_IGN":
            assert "Ctrl-C will not stop it" in err.decode()      # the note, then the same truth
            assert "Ctrl-C" not in serving and f"`kill {proc.pid}` stops it" in serving, serving
        else:
            assert serving.endswith("(Ctrl-C stops)"), serving


def test_a_test_session_leaves_no_cache_folder(tmp_path):
    """Each test process (the controller and every xdist worker) made an /tmp/advisor-cache-* folder
    for calibrate's store and left it: 623 empty ones gathered in /tmp."""
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    node = "tests/test_small_things.py::test_sizes_and_rates_have_one_convention"
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "2", "-p", "no:cacheprovider", node],
                          cwd=Path(__file__).resolve().parent.parent, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not list(tmp_path.glob("advisor-cache-*"))
