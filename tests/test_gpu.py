"""The GPU path, on real GPU profiles (fixtures/gpu-traces) and on synthetic NVIDIA traces
built to the schema (fixtures/gpu/build.py), each checked against xprof's own tools."""

import dataclasses
import json
import os
import sys
import tempfile
from pathlib import Path

import pytest

from advisor.views import activity
from conftest import FIXTURES, GPU_TRACES, analyze_json, rule_ids

REAL = ["te_fused_attn", "jax08_attention", "tf_bert_v100_multiworker"]
LAUNCH = "launch-bound"     # the tiny Transformer on an H100: 2,000+ kernels under 10 µs per step
REMAT, ATTN = "unneeded-remat", "unfused-attention"
SYNTHETIC = {
    # fixture: rules that must fire; every other rule must stay silent. The tiny Transformer materializes
    # its attention scores (unfused-attention: a note, as its float32 q, k, v rule out cuDNN's fused path),
    # and where it rematerializes on 80 GB the remat buys nothing (unneeded-remat)
    "gpu_scan": {"scan-dynamic-update-slice", "missing-remat", "float32-activations", ATTN},
    # the same step with its kernels in command buffers (XLA's default): the same findings
    "gpu_scan_command_buffers": {"scan-dynamic-update-slice", "missing-remat", "float32-activations", ATTN},
    # kernels launched one by one, each gap a launch: launch-bound, not host-bound
    "gpu_launch_bound": {LAUNCH, "float32-activations", REMAT, ATTN},
    "gpu_remat": {"float32-activations", LAUNCH, REMAT, ATTN},
    "gpu_h2d_idle": {"host-bound", "host-device-transfer", "float32-activations", LAUNCH, REMAT, ATTN},
    "gpu_accumulate": {"unneeded-grad-accumulation", LAUNCH, REMAT, ATTN},
    # 24.4 MiB of 32 MiB: no room to drop remat
    "gpu_accumulate_near_capacity": {LAUNCH, ATTN},
    "gpu_bf16": {"float32-attention-logits", LAUNCH, REMAT, ATTN},
    "gpu_data_parallel": {"replicated-state"},
    "gpu_straggler": {"replicated-state", "device-imbalance"},
}


def xplane(folder: Path) -> Path:
    return next(folder.rglob("*.xplane.pb"))


def xprof_tool(path: Path, tool: str) -> dict:
    """xprof's own converter output for the file, run on a private link (it writes caches)."""
    from xprof.convert import raw_to_tool_data

    with tempfile.TemporaryDirectory() as tmp:
        link = Path(tmp) / path.name
        os.symlink(path.resolve(), link)
        data, _ = raw_to_tool_data.xspace_to_tool_data([str(link)], tool, {})
    assert data, f"xprof returned nothing for {tool}"
    return json.loads(data)


def xprof_kernels(path: Path) -> tuple[int, float]:
    """(kernel count, total kernel time in ms) from xprof's kernel_stats."""
    table = xprof_tool(path, "kernel_stats")
    cols = [c["id"] for c in table["cols"]]
    occ, total = cols.index("occurrences"), cols.index("total_duration_us")
    rows = table["rows"]
    return int(sum(r["c"][occ]["v"] for r in rows)), sum(r["c"][total]["v"] for r in rows) / 1e3


def xprof_peaks(path: Path) -> dict[str, int]:
    profile = xprof_tool(path, "memory_profile")["memoryProfilePerAllocator"]
    return {name: int(p["profileSummary"]["peakStats"]["heapAllocatedBytes"]) for name, p in profile.items()}


def close(a, b, rel=0.01):
    return abs(a - b) <= rel * max(abs(a), abs(b), 1e-9)


def check_against_xprof(path: Path, run: dict) -> None:
    devices = run["summary"]["devices"]
    count, ms = xprof_kernels(path)
    assert sum(d["kernels"] for d in devices) == count
    assert close(sum(d["kernel_time_ms"] for d in devices), ms)
    ours = {a["allocator"]: a["peak_bytes"] for a in run["summary"]["allocators"]}
    for allocator, peak in xprof_peaks(path).items():
        assert close(ours[allocator], peak), allocator


@pytest.mark.parametrize("name", REAL)
def test_real_gpu_traces(name):
    path = xplane(GPU_TRACES / name)
    doc = analyze_json(path)
    (run,) = doc["runs"]
    assert run["backend"] == "gpu"
    assert run["device"] and "GPU" in run["device"]
    check_against_xprof(path, run)
    # none of them scans layers, accumulates gradients or trains a state: the JAX rules stay silent
    assert rule_ids(doc) == set()


def test_real_traces_report_active_devices_only():
    run = analyze_json(GPU_TRACES / "tf_bert_v100_multiworker")["runs"][0]
    active = {d["name"] for d in run["summary"]["devices"]}
    assert active == {"/device:GPU:1", "/device:GPU:4", "/device:GPU:6"}
    assert "/device:GPU:0" in run["summary"]["devices_idle"]
    assert "(x3 active)" in run["device"]


def test_amd_device_facts():
    run = analyze_json(GPU_TRACES / "jax08_attention")["runs"][0]
    (dev,) = run["summary"]["devices"]
    assert dev["description"].startswith("AMD") and "304 CUs" in dev["description"]
    assert run["summary"]["device_capacity_bytes"] > 100 * 2**30
    assert sum(dev["time_by_category_ms"].values()) > 0 and "matmul" in dev["time_by_category_ms"]


@pytest.mark.parametrize("name", sorted(SYNTHETIC))
def test_synthetic_gpu_fixtures(name):
    path = xplane(FIXTURES / name)
    doc = analyze_json(path)
    (run,) = doc["runs"]
    assert run["backend"] == "gpu" and run["device"].startswith("NVIDIA H100")
    assert rule_ids(doc) == SYNTHETIC[name]
    check_against_xprof(path, run)
    if name.endswith("command_buffers"):
        # every kernel names its command buffer, no instruction: xprof 2.24 finds no XLA op at all
        # (openxla/xprof issue 3070), where advisor attributes every kernel
        assert not xprof_tool(path, "hlo_stats")["rows"]
        assert run["summary"]["devices"][0]["command_buffer_unattributed"] == 0
    else:
        # the kernels map to the real HLO: xprof's own op statistics resolve them
        assert xprof_tool(path, "hlo_stats")["rows"], "xprof found no XLA ops"


def test_command_buffers_read_as_kernels_launched_one_by_one():
    """The synthetic step in command buffers against the same step launched kernel by kernel: the same
    FLOPs and bytes per category and the same findings, op time within the memsets' few µs."""
    base = analyze_json(FIXTURES / "gpu_scan")["runs"][0]
    graphs = analyze_json(FIXTURES / "gpu_scan_command_buffers")["runs"][0]
    ours = {c["category"]: c for c in graphs["summary"]["efficiency"]["categories"]}
    for cat in base["summary"]["efficiency"]["categories"]:
        assert ours[cat["category"]]["flops"] == pytest.approx(cat["flops"], rel=1e-9)
        assert ours[cat["category"]]["bytes"] == pytest.approx(cat["bytes"], rel=1e-9)
        assert ours[cat["category"]]["time_s"] == pytest.approx(cat["time_s"], rel=0.05)
    assert {f["rule"] for f in graphs["findings"]} == {f["rule"] for f in base["findings"]}


def test_kernels_launched_one_by_one_are_launch_bound_not_host_bound():
    run = analyze_json(FIXTURES / "gpu_launch_bound")["runs"][0]
    eff = run["summary"]["efficiency"]
    assert eff["bound"] == "latency" and "launched one by one" in eff["verdict"]
    (launch,) = [f for f in run["findings"] if f["rule"] == LAUNCH]
    assert launch["evidence"]["launch_gap_share_of_step"] > 0.5
    assert "CUDA graphs" in launch["recommendation"]["text"]
    assert launch["recommendation"]["expected"]["saving"] == pytest.approx(
        launch["evidence"]["launch_gap_time_per_step_ms"], rel=1e-3)


def test_gpu_severities_and_capacity():
    run = analyze_json(FIXTURES / "gpu_remat")["runs"][0]
    remat = {f["rule"]: f for f in run["findings"]}
    # on a GPU bfloat16 is a speed fix too: f32 matmuls at the tf32 rate, half of bf16's (31% of the step)
    speed = remat["float32-activations"]
    assert speed["severity"] == "warning" and speed["recommendation"]["expected"]["metric"] == "step_time"
    assert "tf32 rate" in speed["recommendation"]["text"]
    # tiny kernels, most of the step between launches: the gain is 1% and bfloat16 costs numerics
    tiny = {f["rule"]: f for f in analyze_json(FIXTURES / "gpu_launch_bound")["runs"][0]["findings"]}
    assert tiny["float32-activations"]["severity"] == "info"
    tight = analyze_json(FIXTURES / "gpu_launch_bound", "--device-memory",
                         str(analyze_json(FIXTURES / "gpu_launch_bound")["runs"][0]["summary"]["peak_memory_bytes"]))
    tiny = {f["rule"]: f for f in tight["runs"][0]["findings"]}
    assert tiny["float32-activations"]["severity"] == "warning"       # peak is the whole device: pressure
    run = analyze_json(FIXTURES / "gpu_accumulate")["runs"][0]
    acc = {f["rule"]: f for f in run["findings"]}["unneeded-grad-accumulation"]
    assert acc["evidence"]["device_capacity_bytes"] == run["summary"]["device_capacity_bytes"]
    h2d = {f["rule"]: f for f in analyze_json(FIXTURES / "gpu_h2d_idle")["runs"][0]["findings"]}
    assert h2d["host-device-transfer"]["evidence"]["bytes_per_step"] == 256 * 2**20
    assert h2d["host-bound"]["evidence"]["likely_cause"] == "transfer"


@pytest.fixture(scope="module")
def builder():
    sys.path.insert(0, str(FIXTURES / "gpu"))
    import build
    return build


@pytest.mark.parametrize("variant", [dict(ref_strings=False), dict(legacy_metadata=True), dict(idle_gpus=3)])
def test_schema_variants_read_the_same(builder, tmp_path, variant):
    """str_value vs ref_value strings, the JAX 0.8 metadata layout, idle GPU planes."""
    base = analyze_json(FIXTURES / "gpu_scan")["runs"][0]
    path = builder.build("variant", dataclasses.replace(builder.SCENARIOS["gpu_scan"], **variant), tmp_path)
    run = analyze_json(path)["runs"][0]
    assert run["summary"]["peak_memory_bytes"] == base["summary"]["peak_memory_bytes"]
    assert run["summary"]["devices"][0]["kernels"] == base["summary"]["devices"][0]["kernels"]
    assert {f["rule"] for f in run["findings"]} == {f["rule"] for f in base["findings"]}
    assert len(run["summary"]["devices"]) == 1


def test_eight_gpus_with_nccl_collectives(loaded_profile):
    """8 GPU planes running the data-parallel step: the NCCL kernels are the HLO's all-reduces
    (through hlo_op), each GPU's collective time is split into transfer and waiting for the
    straggler, which device-imbalance names (a warning on GPU)."""
    balanced = loaded_profile("gpu_data_parallel")[0].profile
    assert [d.name for d in activity.of(balanced).devices] == [f"/device:GPU:{i}" for i in range(8)]
    module = balanced.modules[balanced.step_module]
    for d in activity.of(balanced).devices:
        assert d.collectives and {module.instructions[op].opcode for op in d.collectives} == {"all-reduce"}
        assert d.transfer_ns > 0 and d.wait_ns == pytest.approx(0, abs=1)
    (analysis,) = loaded_profile("gpu_straggler")
    others = [d for d in activity.of(analysis.profile).devices if d.name != "/device:GPU:3"]
    assert all(d.wait_ns > 0 for d in others)
    (f,) = [f for f in analysis.findings if f.rule == "device-imbalance"]
    assert f.evidence["straggler"] == "/device:GPU:3" and f.severity == "warning"
