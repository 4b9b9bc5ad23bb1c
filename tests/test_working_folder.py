"""Every Python that advisor starts imports from the installation, never from the folder the user
started advisor in: there `python -m` and `python -c` put that folder first on sys.path. Each test
plants modules there that fail loudly when imported: an `advisor/` package (the clone's root has one,
without rules or workloads), and modules named like the standard library's."""

from __future__ import annotations

import importlib.util
import os
import shutil
import time
from pathlib import Path

import pytest
from werkzeug.test import Client

from conftest import FIXTURES, cli

PLANTED = ("json", "platform", "threading", "socket", "xprof")


def plant(folder: Path) -> Path:
    (folder / "advisor").mkdir(parents=True)
    (folder / "advisor" / "__init__.py").write_text("raise ImportError('the working folder advisor/ was imported')\n")
    for name in PLANTED:
        (folder / f"{name}.py").write_text(f"raise ImportError('the working folder {name}.py was imported')\n")
    return folder


def _runs(folder: Path, *names: str) -> Path:
    for name in names:
        shutil.copytree(FIXTURES / name, folder / "runs" / name, copy_function=os.symlink)
    return folder / "runs"


def test_the_module_command_leaves_the_working_folder_off_the_path(tmp_path):
    import subprocess

    from advisor.child_python import module_command

    plant(tmp_path)
    out = subprocess.run(module_command("advisor.timing", "{not json"), cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 1 and out.stdout.startswith('{"error": "JSONDecodeError'), out.stderr


def test_the_analysis_worker_of_serve_and_tensorboard(tmp_path, monkeypatch):
    """Opening any run executed a json.py of the folder serve was started in; a platform.py there
    made every analysis fail."""
    from advisor.tensorboard.app import AdvisorApp, wsgi

    runs = _runs(tmp_path / "logdir", "transformer_scan")
    monkeypatch.setenv("ADVISOR_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(plant(tmp_path / "cwd"))
    app = AdvisorApp(runs / "transformer_scan", profile_links=False)
    client = Client(wsgi(app))
    name = app.index_of_runs.runs()[0].name
    try:
        st = client.post(f"/analyze?run={name}").json
        end = time.monotonic() + 180
        while st["state"] not in ("done", "failed") and time.monotonic() < end:
            time.sleep(0.2)
            st = client.get(f"/status?run={name}").json
        assert st["state"] == "done", st
    finally:
        app.jobs.stop()
    assert "rule-scan-dynamic-update-slice" in client.get(f"/index.html?run={name}").text


def test_the_timing_worker(tmp_path, monkeypatch):
    """It ran in the temporary folder, to keep the working folder off its path: a shared /tmp, where
    anyone can leave a json.py (this machine's /tmp held an attr.py)."""
    import tempfile

    from advisor.errors import AdvisorError
    from advisor.timing import Worker

    monkeypatch.chdir(plant(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    worker = Worker({"workload": "no-such-workload"}, label="base")
    try:
        with pytest.raises(AdvisorError) as err:
            worker.wait_ready()
    finally:
        worker.close()
    assert "was imported" not in str(err.value) and "no-such-workload" in str(err.value)


def test_the_analysis_processes_of_jobs_and_xprofs_child(tmp_path):
    """--jobs starts its workers with multiprocessing's spawn (`python -c` in this folder, and its
    resource tracker too); xprof's converters run in a child of each analysis."""
    root = plant(tmp_path)
    _runs(root, "transformer_scan", "transformer_remat")
    plain = cli("analyze", "runs", "--format", "json", "--jobs", "1", cwd=root)
    jobs = cli("analyze", "runs", "--format", "json", "--jobs", "2", cwd=root)
    assert plain.returncode == jobs.returncode == 0, jobs.stderr
    assert jobs.stdout == plain.stdout
    assert "converters" not in plain.stdout         # xprof's child ran (it imports xprof): no HLO was lost


@pytest.mark.skipif(not importlib.util.find_spec("ray"), reason="ray is not installed: pip install 'jax-advisor[ray]'")
def test_ray_workers(tmp_path):
    """Ray put the driver's folder on its workers' sys.path: run from the clone's root, every run
    failed (RaySystemError, the import error only in Ray's logs). Relative paths still mean what
    they mean in that folder."""
    root = plant(tmp_path)
    _runs(root, "transformer_scan", "transformer_remat")
    plain = cli("analyze", "runs", "--format", "json", "--jobs", "1", cwd=root)
    result = cli("analyze", "runs", "--format", "json", "--engine", "ray", "--ray-address", "local", "--jobs", "2",
                 cwd=root)
    assert result.returncode == plain.returncode == 0, result.stderr
    assert result.stdout == plain.stdout and "runs/transformer_scan" in result.stdout
