"""--engine ray degrades gracefully: where a local Ray would be slower than the default engine (few
idle cores, one host file) the default engine runs and a note says why; a run whose task does not
finish in ADVISOR_RAY_TIMEOUT_S fails with one line naming it."""

import importlib.util
import os
import shutil
from pathlib import Path

import pytest

from conftest import FIXTURES, cli

needs_ray = pytest.mark.skipif(not importlib.util.find_spec("ray"),
                               reason="ray is not installed: pip install -e '.[ray]' to test --engine ray")


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("two_runs")
    for name in ("transformer_scan", "transformer_remat"):
        shutil.copytree(FIXTURES / name, root / name, copy_function=os.symlink)
    return root


@needs_ray
@pytest.mark.parametrize("idle, runs, why", [(0.6, True, "0.6 of"), (8.0, False, "1 host file to read")])
def test_the_default_engine_runs_where_a_local_ray_would_be_slower(two_runs, monkeypatch, idle, runs, why):
    monkeypatch.setattr("advisor.ray_engine.free_cores", lambda sample_s=0.25: idle)
    path = two_runs if runs else FIXTURES / "transformer_scan"
    plain = cli("analyze", path, "--format", "json", "--jobs", "1")
    result = cli("analyze", path, "--format", "json", "--engine", "ray")
    assert result.returncode == plain.returncode == 0, result.stderr
    assert result.stdout == plain.stdout
    (note,) = [line for line in result.stderr.splitlines() if "note: --engine ray" in line]
    assert why in note and "default engine" in note and "--ray-address local" in note


@needs_ray
def test_a_run_that_does_not_finish_in_time_fails_with_its_name(two_runs, monkeypatch):
    monkeypatch.setenv("ADVISOR_RAY_TIMEOUT_S", "0.001")
    result = cli("analyze", two_runs, "--engine", "ray", "--ray-address", "local", "--jobs", "2")
    assert result.returncode == 3, result.stderr
    lines = [line for line in result.stderr.splitlines() if "not analyzed" in line]
    assert len(lines) == 2 and all("did not finish within 0.001 s" in line for line in lines), result.stderr
    assert any("transformer_scan" in line for line in lines) and any("transformer_remat" in line for line in lines)


@needs_ray
def test_a_bad_timeout_is_one_line(monkeypatch):
    monkeypatch.setenv("ADVISOR_RAY_TIMEOUT_S", "soon")
    result = cli("analyze", FIXTURES / "transformer_scan", "--engine", "ray", "--ray-address", "local")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "advisor: error: ADVISOR_RAY_TIMEOUT_S='soon': expected a number of seconds"]


def test_idle_cores_are_read_longer_only_near_a_count_where_the_plan_changes(monkeypatch):
    """0.1 s of reading where it is clear (beside one busy core of two: 1.0 idle, the default engine
    with one job); 0.25 s in all where one reading is near x.5, where the jobs or Ray's start change."""
    from advisor import ray_engine

    def readings(*values):
        calls = []

        def free_cores(sample_s):
            calls.append(sample_s)
            return values[len(calls) - 1]
        monkeypatch.setattr(ray_engine, "free_cores", free_cores)
        return calls
    calls = readings(1.0)
    assert ray_engine.planned_free_cores() == 1.0 and calls == [ray_engine.SAMPLE_S]
    calls = readings(1.6, 1.1)      # near 1.5: read again, the mean weighted by time
    assert ray_engine.planned_free_cores() == pytest.approx((1.6 * 0.1 + 1.1 * 0.15) / 0.25)
    assert calls == [ray_engine.SAMPLE_S, ray_engine.SETTLE_S]


def test_idle_cores_are_measured():
    from advisor.ray_engine import free_cores

    assert 0 <= free_cores(0.05) <= os.cpu_count()


@needs_ray
def test_joins_a_cluster_started_by_ray_start_that_asks_for_a_token(tmp_path):
    """Ray 2.5x and later: a new local `ray.init()` writes a token to ~/.ray/auth_token, and from then
    on `ray start --head` turns token authentication on, but `ray.init(address=...)` sends the token
    only under RAY_AUTH_MODE=token: joining such a cluster failed with "Failed to connect". The
    user's token is now sent when they have one and have not chosen a mode."""
    import signal
    import socket
    import subprocess
    import sys
    import tempfile
    import time
    from pathlib import Path

    from conftest import advisor

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {**os.environ, "HOME": str(tmp_path), "RAY_USAGE_STATS_ENABLED": "0"}
    env.pop("RAY_AUTH_MODE", None)
    ray_cli = str(Path(sys.executable).with_name("ray"))
    # the token a user has once any local Ray of theirs made one (a new local ray.init() does)
    subprocess.run([ray_cli, "get-auth-token", "--generate"], env=env, check=True, capture_output=True)
    assert (tmp_path / ".ray" / "auth_token").exists()
    short = tempfile.mkdtemp(prefix="ray-")     # Ray's socket paths must fit AF_UNIX's 108 bytes
    head = subprocess.Popen([ray_cli, "start", "--head", "--block", "--num-cpus=1", f"--port={port}",
                             "--include-dashboard=false", f"--temp-dir={short}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while socket.socket().connect_ex(("127.0.0.1", port)):
            assert head.poll() is None and time.monotonic() < deadline, "ray start did not come up"
            time.sleep(0.5)
        one_run = FIXTURES / "transformer_scan"
        plain = cli("analyze", one_run, "--format", "json")
        joined = advisor("analyze", one_run, "--format", "json", "--engine", "ray",
                         "--ray-address", f"127.0.0.1:{port}", env={"HOME": str(tmp_path)})
        assert joined.returncode == 0, joined.stderr[-2000:]
        assert joined.stdout == plain.stdout
    finally:        # the head and every process of its node (its session); SIGTERM takes Ray ~30 s
        try:
            os.killpg(head.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        head.wait(timeout=60)
        shutil.rmtree(short, ignore_errors=True)


@needs_ray
def test_a_failed_ray_task_says_why():
    import ray

    from advisor.locate import RunFiles
    from advisor.ray_engine import _lost

    text = ("\x1b[36mray::run_job()\x1b[39m (pid=1, ip=192.0.2.2)\n  File \"/x/advisor/__init__.py\", line 1\n"
            "    from advisor.rules import ALL\nModuleNotFoundError: No module named 'advisor.rules'")
    (failure,) = _lost(RunFiles(Path("r/vm.xplane.pb"), None, None), ray.exceptions.RaySystemError(text))
    assert "(RaySystemError: ModuleNotFoundError: No module named 'advisor.rules')" in failure.reason
