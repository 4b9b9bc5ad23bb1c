"""Each rule fires on the recorded trace that has its problem and stays silent on the others.

Fixtures: the tiny Transformer (float32, 4 layers) recorded by fixtures/record.py.
"""

import pytest

from conftest import FIXTURES, analyze_json, rule_ids

EXPECTED = {
    # fixture: rules that must fire (every other rule must stay silent). The tiny preset is
    # float32, so float32-activations informs everywhere (CPU: info only).
    "transformer_scan": {"scan-dynamic-update-slice", "missing-remat", "float32-activations"},
    "transformer_remat": {"float32-activations"},
    "transformer_unrolled": {"missing-remat", "float32-activations"},
    "transformer_remat_nodonate": {"missing-buffer-donation"},
    "transformer_remat_block": {"remat-too-broad", "float32-activations"},
    "transformer_accumulate": set(),   # gradient accumulators are not activations
}


@pytest.fixture(scope="module")
def reports():
    return {name: analyze_json(FIXTURES / name) for name in EXPECTED}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_rules_fire_exactly_where_expected(reports, name):
    assert rule_ids(reports[name]) == EXPECTED[name]
    assert not any("internal error" in n for n in reports[name]["runs"][0]["notes"])


def test_scan_finding_has_evidence_and_a_config_change(reports):
    (finding,) = [f for f in reports["transformer_scan"]["runs"][0]["findings"]
                  if f["rule"] == "scan-dynamic-update-slice"]
    ev = finding["evidence"]
    assert ev["share_of_op_time"] >= 0.10
    assert ev["dynamic_update_slice_share"] > 0
    # the stacked buffers are [num_layers, ...]: the tiny preset has 4 layers
    assert all(shape.split("[")[1].startswith("4,") for shape in ev["stacked_buffer_shapes"])
    assert finding["recommendation"]["config"] == {"model.scan_layers": False}
    assert finding["recommendation"]["expected"]["unit"] == "ms"
    assert finding["recommendation"]["expected"]["saving"] > 0
    assert finding["source"].split(":")[0].endswith("transformer.py")


def test_missing_remat_estimates_a_saving_below_the_peak(reports):
    run = reports["transformer_scan"]["runs"][0]
    (finding,) = [f for f in run["findings"] if f["rule"] == "missing-remat"]
    saving = finding["recommendation"]["expected"]["saving"]
    assert 0 < saving < run["summary"]["peak_memory_bytes"]
    assert finding["evidence"]["share_of_peak"] >= 0.5
    assert finding["recommendation"]["config"] == {"model.remat": ["MLP", "Attn"]}


def test_remat_lowers_the_measured_peak(reports):
    peak = {n: reports[n]["runs"][0]["summary"]["peak_memory_bytes"] for n in EXPECTED}
    assert peak["transformer_remat"] < 0.6 * peak["transformer_scan"]


def test_float32_activations_is_only_info_on_cpu(reports):
    for name in ("transformer_scan", "transformer_remat"):
        (finding,) = [f for f in reports[name]["runs"][0]["findings"] if f["rule"] == "float32-activations"]
        assert finding["severity"] == "info"
        assert "CPU" in finding["recommendation"]["text"]


def test_grad_accumulation_is_skipped_without_a_capacity_and_says_so(reports):
    notes = reports["transformer_scan"]["runs"][0]["notes"]
    assert any("unneeded-grad-accumulation was skipped" in n for n in notes)


def test_donation_finding_names_the_memory_held_twice(reports):
    (finding,) = [f for f in reports["transformer_remat_nodonate"]["runs"][0]["findings"]
                  if f["rule"] == "missing-buffer-donation"]
    assert finding["rule"] == "missing-buffer-donation"
    assert finding["evidence"]["donatable_bytes"] > 1024 * 1024
    assert finding["recommendation"]["config"] == {"train.donate": True}


def test_remat_too_broad_estimates_a_small_saving(reports):
    run = reports["transformer_remat_block"]["runs"][0]
    (finding,) = [f for f in run["findings"] if f["rule"] == "remat-too-broad"]
    ev = finding["evidence"]
    assert sorted(ev["sub_blocks"]) == ["attn", "mlp"]
    assert 0 < ev["estimated_saving_over_finer_remat_bytes"] < 0.1 * run["summary"]["peak_memory_bytes"]
    # the estimate is close to what the two recorded runs show
    measured = (reports["transformer_remat"]["runs"][0]["summary"]["peak_memory_bytes"]
                - run["summary"]["peak_memory_bytes"])
    assert 0.5 * measured < ev["estimated_saving_over_finer_remat_bytes"] < 2 * measured
    assert finding["recommendation"]["config"] == {"model.remat": ["MLP", "Attn"]}


def test_grad_accumulation_fires_when_a_capacity_shows_the_batch_fits():
    fits = analyze_json(FIXTURES / "transformer_accumulate", "--device-memory", "1GiB")
    (finding,) = [f for f in fits["runs"][0]["findings"] if f["rule"] == "unneeded-grad-accumulation"]
    assert finding["evidence"]["minibatches"] == 4
    assert finding["recommendation"]["config"] == {"optimizer.num_minibatches": 1}
    # the estimate is an upper bound of the measured full-batch peak (remat fixture: 1 minibatch)
    full = analyze_json(FIXTURES / "transformer_remat")["runs"][0]["summary"]["peak_memory_bytes"]
    assert finding["evidence"]["estimated_full_batch_peak_bytes"] >= full
    # too small a device: silent; no accumulation: silent
    assert "unneeded-grad-accumulation" not in rule_ids(
        analyze_json(FIXTURES / "transformer_accumulate", "--device-memory", "40MiB"))
    assert "unneeded-grad-accumulation" not in rule_ids(
        analyze_json(FIXTURES / "transformer_remat", "--device-memory", "1GiB"))
