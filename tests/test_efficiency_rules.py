"""unaligned-matmul, layout-copies and launch-bound: firing on traces that have the problem, silent on
ones that do not (the CPU corpus programs are covered by tests/test_corpus.py: the three rules are
for GPUs and TPUs and stay silent there).

No GPU here: the GPU traces are built to ../shared/GPU_XPLANE_SCHEMA.md by fixtures/gpu/build.py
from real CPU recordings of two small programs (its kernels are the CPU ops, each a twentieth of
its CPU time), so the HLO, its shapes and layouts are XLA's own.
"""

import dataclasses
import sys

import jax
import jax.numpy as jnp
import pytest

from advisor.engine import analyze_path
from advisor.job import Job
from advisor.rules import select
from advisor.settings import Settings, user_peaks
from conftest import FIXTURES

sys.path.insert(0, str(FIXTURES / "gpu"))
import build as builder  # noqa: E402

RULES = ["unaligned-matmul", "layout-copies", "launch-bound"]


def _problem(x, w):
    h = jnp.tanh(x @ w[:, :57])                              # [1001, 1001] x [1001, 57]: not multiples of 4
    return h, jnp.transpose(x.reshape(7, 143, 7, 143), (2, 3, 0, 1))   # x returned transposed: a layout copy


def _clean(x, w):
    return jnp.tanh(x @ w)                                   # [1024, 1024] x [1024, 1024], no transpose


def _record(logdir, fn, args, steps=3):
    step = jax.jit(fn)
    jax.block_until_ready(step(*args))
    with jax.profiler.trace(str(logdir)):
        for i in range(steps):
            with jax.profiler.StepTraceAnnotation("train", step_num=i):
                out = jax.block_until_ready(step(*args))
    return out


@pytest.fixture(scope="module")
def gpu_traces(tmp_path_factory):
    out = {}
    for name, fn, n in (("problem", _problem, 1001), ("clean", _clean, 1024)):
        cpu = tmp_path_factory.mktemp(f"cpu_{name}")
        _record(cpu, fn, (jnp.ones((n, n)), jnp.ones((n, n))))
        root = tmp_path_factory.mktemp(f"gpu_{name}")
        scenario = dataclasses.replace(builder.SCENARIOS["gpu_scan"], source=str(cpu))
        builder.build(name, scenario, root)
        (analysis,) = analyze_path(root / name, Job(tuple(select(RULES))))
        out[name] = analysis
        if name == "problem":       # and with the user's peaks (1 TB/s: less than the H100's 3.35 TB/s)
            (out["problem with peaks"],) = analyze_path(
                root / name, Job(tuple(select(RULES)), settings=Settings(peaks=user_peaks("100T", "1TB/s"))))
    return out


def _by_rule(analysis):
    return {f.rule: f for f in analysis.findings}


def test_unaligned_matmul_fires_and_names_the_padded_size(gpu_traces):
    f = _by_rule(gpu_traces["problem"])["unaligned-matmul"]
    assert "not a multiple of 4" in f.title          # float32 matmuls run as TF32 on an H100: 16 bytes = 4
    (mm,) = f.evidence["matmuls"]
    assert mm["batch_m_n_k"] == [1, 1001, 57, 1001]
    assert mm["unaligned"] == {"M": {"size": 1001, "padded": 1004}, "N": {"size": 57, "padded": 60},
                               "K": {"size": 1001, "padded": 1004}}
    assert f.recommendation.expected.saving is None      # no aligned matmul ran to compare with


def test_layout_copies_fires_on_the_transposed_output(gpu_traces):
    f = _by_rule(gpu_traces["problem"])["layout-copies"]
    assert f.evidence["layout_share_of_op_time"] >= 0.15
    assert f.recommendation.expected.saving > 0 and "NHWC" in f.recommendation.text


def test_layout_copies_measures_against_the_efficiency_sections_peak(gpu_traces):
    """The rule's share of the peak bandwidth is over the peak the efficiency section names: the device
    table's, or the user's where given (it read the table's alone, whatever the user passed)."""
    for name, bandwidth in (("problem", "3.35 TB/s"), ("problem with peaks", "1 TB/s")):
        analysis = gpu_traces[name]
        peak = analysis.summary["efficiency"]["peak"]
        assert peak["bytes_per_s"] == float(bandwidth.split()[0]) * 1e12
        assert f"of {peak['device']}'s {bandwidth}, {peak['source']})" in _by_rule(analysis)["layout-copies"].title


def test_silent_on_the_clean_program(gpu_traces):
    assert _by_rule(gpu_traces["clean"]) == {}


def test_launch_bound_fires_on_many_tiny_kernels_and_not_on_few_large(loaded_profile):
    fired = {f.rule: f for f in loaded_profile("gpu_bf16")[0].findings}["launch-bound"]
    assert fired.evidence["small_kernels_per_step"] >= 200
    assert fired.evidence["small_kernel_share_of_kernel_time"] >= 0.3
    assert "launch-bound" not in {f.rule for f in loaded_profile("gpu_scan")[0].findings}


def test_a_python_loop_of_one_kernel_calls_is_not_told_to_use_cuda_graphs(tmp_path):
    """A jitted call of two kernels, called 300 times a step from Python: XLA makes no CUDA graph of
    fewer than 5 thunks, so command buffers cannot help; a loop under jit can."""
    step = jax.jit(lambda x, w: jnp.tanh(x @ w))
    x, w = jnp.ones((128, 128)), jnp.full((128, 128), 0.01)
    jax.block_until_ready(step(x, w))
    with jax.profiler.trace(str(tmp_path / "cpu")):
        for i in range(3):
            with jax.profiler.StepTraceAnnotation("train", step_num=i):
                for _ in range(300):
                    x = step(x, w)
                jax.block_until_ready(x)
    scenario = dataclasses.replace(builder.SCENARIOS["gpu_launch_bound"], source=str(tmp_path / "cpu"))
    builder.build("loop", scenario, tmp_path)
    (analysis,) = analyze_path(tmp_path / "loop", Job(tuple(select(RULES))))
    launch = _by_rule(analysis)["launch-bound"]
    assert launch.evidence["small_kernels_per_step"] == 600 and launch.evidence["most_kernels_per_program"] == 2
    assert "lax.fori_loop instead of a Python loop" in launch.recommendation.text
    assert "CUDA graphs" not in launch.recommendation.text      # the step's program of hundreds of ops gets it:
    # tests/test_gpu.py::test_kernels_launched_one_by_one_are_launch_bound_not_host_bound


def test_silent_on_the_real_gpu_traces(loaded_profile):
    traces = FIXTURES / "gpu-traces"
    if not traces.exists():
        pytest.skip("fixtures/gpu-traces is absent")
    for name in ("jax08_attention", "te_fused_attn", "tf_bert_v100_multiworker"):
        fired = {f.rule for a in loaded_profile(traces / name) for f in a.findings}
        assert not fired & set(RULES), name
