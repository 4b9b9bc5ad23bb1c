"""--engine ray degrades gracefully: where a local Ray would be slower than the default engine (few
idle cores, one host file) the default engine runs and a note says why; a run whose task does not
finish in ADVISOR_RAY_TIMEOUT_S fails with one line naming it."""

import importlib.util
import os
import shutil

import pytest

from conftest import FIXTURES, cli

needs_ray = pytest.mark.skipif(not importlib.util.find_spec("ray"),
                               reason="ray is not installed: pip install 'jax-advisor[ray]' to test --engine ray")


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


def test_idle_cores_are_measured():
    from advisor.ray_engine import free_cores

    assert 0 <= free_cores(0.05) <= os.cpu_count()
