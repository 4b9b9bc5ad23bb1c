"""Bad input: one clear line on stderr, exit code 2, no traceback, nothing changed."""

import json
import os
import shutil
import stat
import subprocess
import sys

import pytest

from conftest import FIXTURES, ROOT, advisor, cli


def assert_one_line_error(proc):
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("advisor: error: ")
    assert "Traceback" not in proc.stderr


def test_missing_path(tmp_path):
    proc = advisor("analyze", tmp_path / "nope")
    assert_one_line_error(proc)
    assert "no such file or folder" in proc.stderr


def test_folder_without_traces(tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    proc = cli("analyze", tmp_path)
    assert_one_line_error(proc)
    assert "no .xplane.pb traces found" in proc.stderr


def test_not_an_xplane_file(tmp_path):
    f = tmp_path / "trace.json"
    f.write_text("{}")
    assert_one_line_error(cli("analyze", f))


@pytest.mark.parametrize("cut", [0.5, 0.999])
def test_truncated_trace(tmp_path, cut):
    src = next((FIXTURES / "transformer_remat").rglob("*.xplane.pb"))
    data = src.read_bytes()
    bad = tmp_path / "host.xplane.pb"
    bad.write_bytes(data[: int(len(data) * cut)])
    proc = cli("analyze", bad)
    assert_one_line_error(proc)
    assert "truncated or corrupt" in proc.stderr
    assert bad.read_bytes() == data[: int(len(data) * cut)]


@pytest.mark.parametrize("head, words", [(b"", "zero bytes, field number 0"),
                                         (b"\x1f\x8b\x08\x00", "gzip-compressed (decompress it first")])
def test_what_cannot_be_a_trace_is_refused_at_its_first_bytes(tmp_path, head, words):
    """A 256 MiB file of zeros took 39 s before "cannot parse" (xprof's child and the HLO slicer read
    it all), and grew a TensorBoard worker by 6 MiB/s."""
    bad = tmp_path / "host.xplane.pb"
    with open(bad, "wb") as f:
        f.write(head)
        f.truncate(256 * 2**20)         # sparse: no disk
    proc = cli("analyze", bad)
    assert_one_line_error(proc)
    assert f"{bad}: not a trace (a serialized XSpace): it " in proc.stderr and words in proc.stderr


def test_garbage_trace(tmp_path):
    bad = tmp_path / "host.xplane.pb"
    bad.write_bytes(b"\xff\xfe not a protobuf at all " * 50)
    assert_one_line_error(cli("analyze", bad))


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


@pytest.mark.parametrize("args, closest", [
    (["analyze", str(FIXTURES / "transformer_remat"), "--select", "missing-remt"], "did you mean 'missing-remat'?"),
    (["run-workload", "transformer", "--set", "model.scan_layer=false"], "did you mean 'model.scan_layers'?"),
    (["run-workload", "transfomer"], "did you mean 'transformer'?"),
    (["run-workload", "transformer", "--set", "model.dtype=bfloat"], "did you mean 'bfloat16'?"),
    (["run-workload", "transformer", "--set", "model.remat=MLP+Atn"], "did you mean 'Attn'?"),
    (["analyze", str(FIXTURES / "transformer_remat"), "--option", "missing-remat.min_shar=0.1"],
     "did you mean 'min_share'?"),
])
def test_a_misspelt_name_is_answered_with_the_closest_valid_one_first(args, closest):
    proc = advisor(*args)
    assert_one_line_error(proc)
    assert closest in proc.stderr and proc.stderr.index(closest) < proc.stderr.index("valid ")


def test_no_guess_for_a_name_like_none_of_the_valid_ones():
    proc = advisor("analyze", str(FIXTURES / "transformer_remat"), "--select", "zzzz")
    assert "did you mean" not in proc.stderr and "valid ids: scan-dynamic-update-slice" in proc.stderr


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
        proc = cli("analyze", logdir)
        assert proc.returncode == 0, proc.stderr
        assert "scan-dynamic-update-slice" in proc.stdout
        assert _snapshot(logdir) == before
    finally:
        for p, mode in modes.items():
            os.chmod(p, mode)


# --- Fragile around the trace (issue 9): side files, long paths, many runs, sizes, dtypes ---



def _run_copy(tmp_path, fixture="transformer_scan"):
    """A private copy of a fixture; returns the run folder (the one holding the .xplane.pb)."""
    shutil.copytree(FIXTURES / fixture, tmp_path / fixture)
    return next((tmp_path / fixture).rglob("*.xplane.pb")).parent


def _analyze_json_ok(path):
    proc = cli("analyze", path, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.parametrize("content, words", [
    ("[1, 2, 3]", "holds a list, not an object; ignored"),
    ('{"num_params": "many", "workload": "transformer"}', "num_params is 'many', not a whole number; ignored"),
    ("{not json", "not readable JSON"),
])
def test_malformed_run_metadata_is_ignored_with_a_warning(tmp_path, content, words):
    run = _run_copy(tmp_path)
    (run / "advisor_run.json").write_text(content)
    doc = _analyze_json_ok(run)
    assert any(words in w for w in doc["warnings"]), doc["warnings"]
    assert "scan-dynamic-update-slice" in {f["rule"] for f in doc["runs"][0]["findings"]}
    proc = cli("analyze", run)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr and words in proc.stdout


def test_corrupt_memory_profile_is_a_warning_not_a_failed_analysis(tmp_path):
    run = _run_copy(tmp_path)
    (run / "memory.prof").write_bytes(b"\x1f\x8b\x08\x00 not really gzip")
    doc = _analyze_json_ok(run)
    assert any("memory.prof: not a readable device memory profile" in w for w in doc["warnings"])
    assert doc["runs"][0]["findings"], "the rest of the analysis still runs"


def test_path_over_4096_characters_is_one_line(tmp_path):
    long_path = str(tmp_path) + ("/" + "x" * 250) * 20 + "/host.xplane.pb"
    proc = cli("analyze", long_path)
    assert_one_line_error(proc)


def test_one_truncated_run_among_three_does_not_abort_the_others(tmp_path):
    logdir = tmp_path / "logs"
    for name in ("a", "b", "c"):
        shutil.copytree(FIXTURES / "transformer_scan", logdir / name)
    bad = next((logdir / "b").rglob("*.xplane.pb"))
    bad.write_bytes(bad.read_bytes()[:1000])
    proc = cli("analyze", logdir, "--format", "json")
    assert proc.returncode == 3, proc.stderr
    assert "Traceback" not in proc.stderr and "not analyzed" in proc.stderr
    doc = json.loads(proc.stdout)
    assert len(doc["runs"]) == 2 and [f["path"] for f in doc["failed"]] == [str(bad)]
    assert "truncated or corrupt" in doc["failed"][0]["reason"]
    assert any(str(bad) in w for w in doc["warnings"])
    text = cli("analyze", logdir)
    assert text.returncode == 3 and text.stdout.count("scan-dynamic-update-slice") >= 2


@pytest.mark.parametrize("args", [
    ["sweep", "mlp", "--vary", "train.steps=1,2", "--memory-limit", "24XB"],
    ["run-workload", "mlp", "--memory-limit", "0MB"],
    ["analyze", str(FIXTURES / "transformer_scan"), "--device-memory", "lots"],
])
def test_bad_sizes_are_one_line(args, tmp_path):
    proc = advisor(*args, "--logdir", tmp_path) if args[0] != "analyze" else advisor(*args)
    assert_one_line_error(proc)
    assert "expects a positive size like 24GB" in proc.stderr
    assert not list(tmp_path.rglob("*.xplane.pb"))


def test_empty_trace_is_bad_input_not_no_findings(tmp_path):
    """A 0-byte file is not a trace: exit 2 alone (as `check` says), listed as not analyzed among others."""
    empty = tmp_path / "one" / "host.xplane.pb"
    empty.parent.mkdir()
    empty.write_bytes(b"")
    proc = cli("analyze", empty)
    assert_one_line_error(proc)
    assert "the file is empty (0 bytes), not a trace" in proc.stderr
    shutil.copytree(FIXTURES / "transformer_scan", tmp_path / "scan")
    proc = cli("analyze", tmp_path, "--format", "json")
    assert proc.returncode == 3
    doc = json.loads(proc.stdout)
    assert len(doc["runs"]) == 1 and "empty" in doc["failed"][0]["reason"]


def test_trace_where_nothing_ran_warns(tmp_path):
    code = ("import jax, time\n"
            f"jax.profiler.start_trace({str(tmp_path)!r})\ntime.sleep(0.05)\njax.profiler.stop_trace()\n")
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
    doc = _analyze_json_ok(tmp_path)
    assert any("no XLA op ran while it was recorded" in w for w in doc["warnings"]), doc["warnings"]


def test_unreadable_step_hlo_names_the_rules_that_could_not_run(tmp_path):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import fuzz

    run = _run_copy(tmp_path)
    xplane = next(run.glob("*.xplane.pb"))
    # mutant 1 of seed 0 flips one byte inside the step program's HLO (see benchmarks/fuzz.py)
    (_, kind, mutant), = [m for m in fuzz.mutants(xplane.read_bytes(), 0, 2) if m[0] == 1]
    assert kind == "hlo_flip"
    xplane.write_bytes(mutant)
    doc = _analyze_json_ok(run)
    assert any("HLO of jit_train_step(44) could not be read: scan-dynamic-update-slice, missing-remat" in w
               and "could not run" in w for w in doc["warnings"]), doc["warnings"]
    assert "PARTIAL: HLO of jit_train_step(44)" in cli("analyze", run).stdout


def test_two_traces_started_in_the_same_second_get_their_own_run_folders(tmp_path):
    import jax
    import jax.numpy as jnp

    from advisor.runner import _claim_run_dir, _private_logdir

    privates = [_private_logdir(tmp_path), _private_logdir(tmp_path)]
    assert privates[0] != privates[1]
    for private in privates:
        jax.profiler.start_trace(str(private))
        jnp.ones(8).sum().block_until_ready()
        jax.profiler.stop_trace()
    runs = [_claim_run_dir(p, tmp_path / "plugins" / "profile") for p in privates]
    assert runs[0] != runs[1] and all(list(r.glob("*.xplane.pb")) for r in runs)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plugins"], "private logdirs are removed"


def test_every_xla_primitive_type_has_its_width():
    from jax._src.lib import xla_client

    from advisor.load.element_types import ELEMENT_TYPES
    from advisor.load.hlo import shape_info
    from advisor.load.hlo_proto import HloProto

    by_name = {n.lower(): int(v) for n, v in xla_client.PrimitiveType.__members__.items()}
    shape = HloProto().hlo_module.computations.add().instructions.add().shape
    shape.dimensions.extend([3, 5])
    expected = {"f8e4m3fn": 15, "f8e5m2": 15, "f8e4m3b11fnuz": 15, "s4": 8, "u4": 8, "f4e2m1fn": 8,
                "bf16": 30, "f32": 60, "c128": 240, "pred": 15, "s8": 15}
    for name, nbytes in expected.items():
        shape.element_type = by_name[name]
        assert shape_info(shape) == (name, (3, 5), nbytes), name
    arrays = [n for n in by_name if n not in ("primitive_type_invalid", "tuple", "opaque_type", "token")]
    assert all(by_name[n] in ELEMENT_TYPES for n in arrays), set(arrays) - {ELEMENT_TYPES[v][0] for v in ELEMENT_TYPES}


def test_xprof_temp_folders_are_removed(tmp_path, monkeypatch):
    import tempfile

    from advisor.load.xprof_tools import read_xprof

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    result = read_xprof(next((FIXTURES / "transformer_scan").rglob("*.xplane.pb")), "jit_train_step(44)")
    assert result.error is None and result.memory_viewer and "jit_train_step(44)" in result.hlo_protos
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("args, words", [
    (["analyze", "--format", "xml", "x"], "Invalid value for '--format'"),
    (["analyze", "--nope", "x"], "No such option '--nope'"),
    (["analyze"], "Missing argument 'PATH'"),
    (["bogus"], "No such command 'bogus'"),
])
def test_usage_errors_are_one_line(args, words):
    """click's own errors (an unknown option, a bad choice) are bad input like any other: one line, exit 2,
    not click's usage block and hint."""
    proc = cli(*args)
    assert_one_line_error(proc)
    assert words in proc.stderr and "--help" in proc.stderr
