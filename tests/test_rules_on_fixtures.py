"""Each rule fires on the recorded trace that has its problem and stays silent on the others.

Fixtures: the tiny Transformer (float32, 4 layers) recorded by fixtures/record.py.
"""

import pytest

from conftest import FIXTURES, analyze_json, rule_ids

EXPECTED = {
    # fixture: rules that must fire (every other rule must stay silent)
    "transformer_scan": {"scan-dynamic-update-slice", "missing-remat"},
    "transformer_remat": set(),
    "transformer_unrolled": {"missing-remat"},
    "transformer_remat_nodonate": {"missing-buffer-donation"},
}


@pytest.fixture(scope="module")
def reports():
    return {name: analyze_json(FIXTURES / name) for name in EXPECTED}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_rules_fire_exactly_where_expected(reports, name):
    assert rule_ids(reports[name]) == EXPECTED[name]


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


def test_donation_finding_names_the_memory_held_twice(reports):
    (finding,) = reports["transformer_remat_nodonate"]["runs"][0]["findings"]
    assert finding["rule"] == "missing-buffer-donation"
    assert finding["evidence"]["donatable_bytes"] > 1024 * 1024
    assert finding["recommendation"]["config"] == {"train.donate": True}
