"""How a run was recorded (summary.recorded_with): versions, XLA_FLAGS and command buffers, in the
report and in compare. The shared H100 seed traces were recorded with command buffers on and off
(`XLA_FLAGS=--xla_gpu_enable_command_buffer=`, fixtures/h100-traces/README.md)."""

import json
import shutil

from advisor import runner
from conftest import FIXTURES, cli

SEED = FIXTURES / "h100-traces" / "transformer_seed"
SEED_OFF = FIXTURES / "h100-traces" / "transformer_seed_no_command_buffers"


def test_the_seed_traces_say_how_they_were_recorded_and_compare_names_the_difference():
    text = cli("analyze", SEED).stdout
    # the trace's /host:metadata plane holds cuda_version "13000", jax_version "0.11.2"
    assert "recorded       with jax 0.11.2, jaxlib 0.11.2, cuda 13000, cuda driver 13000, command buffers used" in text
    out = cli("compare", SEED, SEED_OFF).stdout.splitlines()
    assert out[2:4] == ["changed: no setting of the workload (the same configuration on both sides)",
                        "recorded differently: command buffers: used -> not used"], out[:5]


def test_compare_names_the_xla_flag_two_runs_were_recorded_with(tmp_path):
    for name, flags in ((SEED, ""), (SEED_OFF, "--xla_gpu_enable_command_buffer=")):
        dest = tmp_path / name.name
        shutil.copytree(name, dest)
        meta_path = next(dest.rglob("advisor_run.json"))
        meta = json.loads(meta_path.read_text())
        meta["xla_flags"] = flags
        meta_path.write_text(json.dumps(meta))
    base, new = tmp_path / SEED.name, tmp_path / SEED_OFF.name
    text = cli("compare", base, new).stdout
    assert "recorded differently: XLA_FLAGS: (none) -> --xla_gpu_enable_command_buffer=; " \
           "command buffers: used -> not used" in text, text
    pair = json.loads(cli("compare", base, new, "--format", "json").stdout)["pairs"][0]
    assert pair["recording_changes"] == ["XLA_FLAGS: (none) -> --xla_gpu_enable_command_buffer=",
                                         "command buffers: used -> not used"]
    assert pair["new"]["recorded_with"]["xla_flags"] == "--xla_gpu_enable_command_buffer="
    assert "XLA_FLAGS=--xla_gpu_enable_command_buffer=" in cli("analyze", new).stdout


def test_the_runner_records_the_versions_and_xla_flags(monkeypatch):
    monkeypatch.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=2")
    got = runner.recording()
    assert got["xla_flags"] == "--xla_force_host_platform_device_count=2"
    assert got["versions"]["jax"] and got["versions"]["jaxlib"] and got["versions"]["platform"] == "cpu"


def test_a_cpu_trace_without_a_run_record_reads_its_versions_from_the_trace():
    doc = json.loads(cli("analyze", FIXTURES / "transformer_scan", "--format", "json").stdout)
    run = doc["runs"][0] if "runs" in doc else doc["run"]
    recorded = run["summary"]["recorded_with"]
    assert "command_buffers" not in recorded      # a GPU's fact only
