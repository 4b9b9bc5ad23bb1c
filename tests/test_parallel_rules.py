"""replicated-state, exposed-communication and device-imbalance on traces recorded on 8 simulated
CPU devices (fixtures/record_parallel.py), each firing where the problem is and silent where not."""

from advisor.rules import BY_ID


def findings(loaded_profile, name, rule):
    (analysis,) = loaded_profile(name)
    return [f for f in analysis.findings if f.rule == rule]


def test_replicated_state_fires_on_data_parallel(loaded_profile):
    (f,) = findings(loaded_profile, "parallel/data_parallel", "replicated-state")
    ev = f.evidence
    # 4 layers of 512 x 512 + 512 float32 parameters, and Adam's two moments: ~12 MiB on each device
    assert ev["devices"] == 8 and 12_000_000 < ev["state_bytes_per_device"] < 13_000_000
    assert 0.5 < ev["share_of_peak"] <= 1
    assert ev["gradient_all_reduce_bytes"] > 4 * 512 * 512 * 4
    assert f.recommendation.expected.saving == int(ev["state_bytes_per_device"] * 7 / 8)
    assert "FSDP" in f.recommendation.text and "all-gathered" in f.recommendation.cost
    assert f.severity == "info"      # no memory pressure: FSDP costs communication


def test_replicated_state_silent_where_state_is_sharded_small_or_on_one_device(loaded_profile):
    for name in ("parallel/fsdp", "parallel/straggler", "transformer_scan", "corpus/sharded_jit_warm",
                 "corpus/pmap_warm"):
        assert not findings(loaded_profile, name, "replicated-state"), name


def test_rules_are_registered():
    assert {"replicated-state"} <= set(BY_ID)
