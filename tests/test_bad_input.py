"""Bad input: one clear line on stderr, exit code 2, no traceback, nothing changed."""

import os
import shutil
import stat

import pytest

from conftest import FIXTURES, advisor


def assert_one_line_error(proc):
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    lines = [l for l in proc.stderr.splitlines() if l.strip()]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("advisor: error: ")
    assert "Traceback" not in proc.stderr


def test_missing_path(tmp_path):
    proc = advisor("analyze", tmp_path / "nope")
    assert_one_line_error(proc)
    assert "no such file or folder" in proc.stderr


def test_folder_without_traces(tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    proc = advisor("analyze", tmp_path)
    assert_one_line_error(proc)
    assert "no .xplane.pb traces found" in proc.stderr


def test_not_an_xplane_file(tmp_path):
    f = tmp_path / "trace.json"
    f.write_text("{}")
    assert_one_line_error(advisor("analyze", f))


@pytest.mark.parametrize("cut", [0.5, 0.999])
def test_truncated_trace(tmp_path, cut):
    src = next((FIXTURES / "transformer_remat").rglob("*.xplane.pb"))
    data = src.read_bytes()
    bad = tmp_path / "host.xplane.pb"
    bad.write_bytes(data[: int(len(data) * cut)])
    proc = advisor("analyze", bad)
    assert_one_line_error(proc)
    assert "truncated or corrupt" in proc.stderr
    assert bad.read_bytes() == data[: int(len(data) * cut)]


def test_garbage_trace(tmp_path):
    bad = tmp_path / "host.xplane.pb"
    bad.write_bytes(b"\xff\xfe not a protobuf at all " * 50)
    assert_one_line_error(advisor("analyze", bad))


@pytest.mark.parametrize("args, words", [
    (["run-workload", "resnet"], "unknown workload"),
    (["run-workload", "transformer", "--preset", "huge"], "unknown preset"),
    (["run-workload", "transformer", "--set", "model.depth=3"], "unknown config key"),
    (["run-workload", "transformer", "--set", "model.scan_layers=maybe"], "bad value for model.scan_layers"),
    (["run-workload", "transformer", "--set", "model.remat=MLP,Everything"], "bad value for model.remat"),
    (["run-workload", "transformer", "--set", "model.dtype=float8"], "bad value for model.dtype"),
    (["run-workload", "transformer", "--set", "model.head_dim=48"], "multiple of model.head_dim"),
    (["run-workload", "transformer", "--set", "noequals"], "expected KEY=VALUE"),
    (["analyze", str(FIXTURES / "transformer_remat"), "--select", "no-such-rule"], "unknown rule id"),
    (["explain", "no-such-rule"], "unknown rule id"),
])
def test_bad_workload_config_and_rule_ids(args, words):
    proc = advisor(*args)
    assert_one_line_error(proc)
    assert words in proc.stderr


def test_unknown_key_lists_the_valid_ones():
    proc = advisor("run-workload", "transformer", "--set", "model.depth=3")
    assert "model.num_layers" in proc.stderr and "model.scan_layers" in proc.stderr


def _snapshot(root):
    return {p: (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*")}


def test_analyze_reads_a_read_only_folder_and_writes_nothing(tmp_path):
    logdir = tmp_path / "logs"
    shutil.copytree(FIXTURES / "transformer_scan", logdir)
    before = _snapshot(logdir)
    modes = {}
    for p in [logdir, *logdir.rglob("*")]:
        modes[p] = p.stat().st_mode
        os.chmod(p, p.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
    try:
        proc = advisor("analyze", logdir)
        assert proc.returncode == 0, proc.stderr
        assert "scan-dynamic-update-slice" in proc.stdout
        assert _snapshot(logdir) == before
    finally:
        for p, mode in modes.items():
            os.chmod(p, mode)
