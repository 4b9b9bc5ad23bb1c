"""unneeded-remat and unfused-attention: GPU step time judged against what memory requires and what a
fused attention takes, on the real H100/H200 traces (fixtures/h100-traces, whose README gives the
untraced figures) and the synthetic GPU fixtures built to the real schema (fixtures/gpu/build.py)."""

import pytest

from advisor.remedies import Kind, Remedy
from advisor.rules import unfused_attention, unneeded_remat
from conftest import FIXTURES

H100 = FIXTURES / "h100-traces"
GIB = 1024**3
# fixtures/h100-traces/README.md: the tutorial's notebook, bf16, 4 minibatches, unrolled without remat, on an
# H200: peak 9,135.9 MiB from XLA's buffer assignment; the same model as the seed Transformer
UNROLLED_NO_REMAT_PEAK = 9135.9 * 2**20


def only(analysis, rule):
    found = [f for f in analysis.findings if f.rule == rule]
    assert len(found) <= 1
    return found[0] if found else None


@pytest.fixture(scope="module")
def seed(loaded_profile):
    (analysis,) = loaded_profile(H100 / "transformer_seed")
    return analysis


def test_seed_gets_unrolled_without_remat_with_its_cost_and_gain(seed):
    finding = only(seed, "unneeded-remat")
    assert finding is not None and finding.severity == "warning"
    rec, ev = finding.recommendation, finding.evidence
    # both together, never scan without remat alone (201 ms on the H100, slower than 153.9 ms)
    assert rec.config == {"model.scan_layers": False, "model.remat": ()}
    assert "advisor tune transformer" in rec.text
    # measured: the rematted ops' time and the scan's stacking copies; the recomputed matmuls' FLOPs
    assert ev["recompute_ms_per_step"] == pytest.approx(30.93, abs=0.05)
    assert ev["stacking_copies_ms_per_step"] == pytest.approx(0.98, abs=0.02)
    assert ev["recomputed_matmul_flops_per_step"] == pytest.approx(6.60e12, rel=0.01)   # the README's count
    # the gain is below what the H100 measured unrolled without remat (153.9 -> 114.5 ms): an estimate, not a promise
    assert 0 < rec.expected.saving < 153.9 - 114.5
    # the peak it would need: above and within 15% of the measured unrolled, no-remat peak of the same model
    need = ev["estimated_peak_without_remat_bytes"]
    assert UNROLLED_NO_REMAT_PEAK < need < 1.15 * UNROLLED_NO_REMAT_PEAK
    assert need < 0.8 * ev["device_capacity_bytes"]


def test_unneeded_remat_is_silent_where_memory_is_tight(seed, loaded_profile):
    profile = seed.profile
    assert list(unneeded_remat.check(profile, capacity_bytes=16 * GIB))          # 9.8 GiB fits in 80% of 16
    assert not list(unneeded_remat.check(profile, capacity_bytes=12 * GIB))      # ... not in 80% of 12
    (near,) = loaded_profile("gpu_accumulate_near_capacity")                    # 24.4 MiB of 32 MiB
    assert only(near, "unneeded-remat") is None
    (room,) = loaded_profile("gpu_accumulate")                                  # the same step on 80 GB
    assert only(room, "unneeded-remat") is not None


def test_unneeded_remat_says_nothing_on_a_cpu(loaded_profile):
    """On a CPU remat has measured faster and unrolling slower (issue 38's sweep): no GPU gain claimed."""
    (analysis,) = loaded_profile("transformer_remat")
    assert analysis.profile.backend == "cpu" and analysis.profile.modules[analysis.profile.step_module].has_remat
    assert not list(unneeded_remat.check(analysis.profile, capacity_bytes=64 * GIB))
    assert only(analysis, "unneeded-remat") is None


def test_unneeded_remat_needs_remat(loaded_profile):
    (scan,) = loaded_profile("gpu_scan")           # scan without remat: scan-dynamic-update-slice's case
    assert only(scan, "unneeded-remat") is None


def test_seed_names_its_attention_time_and_the_fused_alternative(seed):
    finding = only(seed, "unfused-attention")
    assert finding is not None and finding.severity == "warning"
    ev = finding.evidence
    assert ev["attention_ms_per_step"] == pytest.approx(47.42, abs=0.05)
    assert ev["matmul_ms_per_step"] + ev["softmax_and_masks_ms_per_step"] == pytest.approx(ev["attention_ms_per_step"],
                                                                                           abs=0.002)
    assert (ev["head_dim"], ev["dtype"], ev["causal"], ev["rematted"], ev["sequence_lengths"]) == \
        (128, "bf16", True, True, [512])
    # the forward's QK and PV matmuls as XLA computes them: 4·B·H·T²·D over 12 layers, B = 64 per step
    assert ev["forward_matmul_flops_per_step"] == pytest.approx(4 * 64 * 8 * 512**2 * 128 * 12, rel=0.01)
    assert ev["fused_flops_per_s"] == unfused_attention.MEASURED["NVIDIA H100 SXM"][0]
    assert "attention_cudnn" in ev["fused_rate_source"]
    assert "implementation='cudnn'" in finding.recommendation.text
    assert "no dropout" in finding.recommendation.cost and "head dims up to 128" in finding.recommendation.cost


def test_the_fused_rate_is_what_advisor_reads_on_the_cudnn_trace(loaded_profile):
    """The cited rate is the attention_cudnn trace's FLOPs per step over its step time, as advisor reads them."""
    (analysis,) = loaded_profile(H100 / "attention_cudnn")
    summary = analysis.summary
    rate = summary["efficiency"]["flops_per_step"] / (summary["step_time_ms"] / 1e3)
    assert rate == pytest.approx(unfused_attention.MEASURED["NVIDIA H100 SXM"][0], rel=0.005)
    assert only(analysis, "unfused-attention") is None          # fused already


def test_no_measured_rate_on_another_gpu_model(loaded_profile):
    (analysis,) = loaded_profile(H100 / "tutorial_notebook_unrolled_h200")
    finding = only(analysis, "unfused-attention")
    assert finding is not None and finding.severity == "info"
    assert finding.evidence["fused_flops_per_s"] is None
    assert "no fused rate measured on NVIDIA H200" in finding.recommendation.expected.text


def test_unfused_attention_is_silent_without_materialized_scores_or_cudnn(loaded_profile):
    for name in ("gpu-traces/te_fused_attn", "gpu-traces/jax08_attention", "gpu_data_parallel"):
        (analysis,) = loaded_profile(name)
        assert only(analysis, "unfused-attention") is None, name


def test_float32_attention_is_a_note(loaded_profile):
    """The tiny float32 Transformer: the cuDNN path takes bf16/f16 only, so no gain is promised."""
    (analysis,) = loaded_profile("gpu_remat")
    finding = only(analysis, "unfused-attention")
    assert finding.severity == "info" and finding.recommendation.expected.saving is None
    assert "float16 or bfloat16 only" in finding.recommendation.text


def test_no_remat_config_for_the_bundled_workloads():
    from advisor import workloads

    seed = workloads.resolve("transformer", "seed", [])
    assert workloads.remedy_config("transformer", Remedy(Kind.NO_REMAT, "unrolled"), seed) == {
        "model.scan_layers": False, "model.remat": ()}
    assert workloads.remedy_config("transformer", Remedy(Kind.NO_REMAT), seed) == {"model.remat": ()}
    tiny = workloads.resolve("transformer", "tiny", [])          # no remat already
    assert workloads.remedy_config("transformer", Remedy(Kind.NO_REMAT), tiny) == {}
    mlp = workloads.resolve("mlp", "tiny", ["model.remat=true"])
    assert workloads.remedy_config("mlp", Remedy(Kind.NO_REMAT), mlp) == {"model.remat": False}


def test_the_compiled_peak_refutes_a_variant_that_does_not_fit(loaded_profile):
    """For a bundled workload's run the variant is compiled (run-workload, analyze --compile-check): its
    peak is XLA's, and a variant that does not fit the device is not printed as a fix. The tiny remat
    Transformer, compiled here unrolled without remat, against a device of 1 MiB and one of 1 GiB."""
    import copy

    from advisor.compiled_advice import compile_check, overrides_of
    from advisor.findings import Expected, Finding, Recommendation

    (analysis,) = loaded_profile("transformer_remat")
    meta = analysis.profile.run_metadata
    overrides = overrides_of(meta["workload"], meta["preset"], meta["config"])
    results = {}
    for capacity in (2**20, 2**30):
        rec = Recommendation(text="unroll and drop remat", config={"model.scan_layers": False, "model.remat": ()},
                             remedy=Remedy(Kind.NO_REMAT, "unrolled"), expected=Expected("step_time", 1.0, "ms", "x"),
                             cost="more memory")
        finding = Finding(rule="unneeded-remat", severity="warning", title="t",
                          evidence={"device_capacity_bytes": capacity}, recommendation=rec, impact=0.2)
        shell = copy.copy(analysis)
        shell.findings = [finding]
        compile_check(meta["workload"], meta["preset"], overrides, shell, base=analysis.profile.memory.peak_bytes)
        results[capacity] = finding.recommendation
    small, large = results[2**20], results[2**30]
    assert small.config == {} and small.checked == "compiled" and "more than the device's 1.0 MiB" in small.check
    assert large.config and "--set model.scan_layers=false --set model.remat=none: peak" in large.check
