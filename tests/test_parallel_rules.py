"""replicated-state, exposed-communication and device-imbalance on traces recorded on 8 simulated
CPU devices (fixtures/record_parallel.py), each firing where the problem is and silent where not."""

import pytest

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


def test_replicated_state_fires_on_pmap_copies(loaded_profile):
    """jax.pmap stacks one copy of the state per device: split on paper, replicated in fact."""
    (f,) = findings(loaded_profile, "parallel/pmap_data_parallel", "replicated-state")
    assert f.evidence["devices"] == 8 and f.evidence["state_bytes_per_device"] > 4 * 2**20


def test_replicated_state_silent_where_state_is_sharded_small_or_on_one_device(loaded_profile):
    for name in ("parallel/fsdp", "parallel/straggler", "transformer_scan", "corpus/sharded_jit_warm",
                 "corpus/pmap_warm"):
        assert not findings(loaded_profile, name, "replicated-state"), name


def test_rules_are_registered():
    assert {"replicated-state", "exposed-communication", "device-imbalance"} <= set(BY_ID)


def test_exposed_communication_fires_where_collectives_dominate(loaded_profile):
    for name in ("parallel/comm_bound", "parallel/fsdp"):
        (f,) = findings(loaded_profile, name, "exposed-communication")
        ev = f.evidence
        assert ev["transfer_share"] >= 0.2 and ev["devices"] == 8
        assert ev["transfer_ms"] + ev["wait_ms"] == pytest.approx(ev["exposed_collective_ms"], abs=0.01)
        assert ev["bytes_per_device_per_step"] > 0 and ev["collectives"][0]["algorithmic_gb_per_s"] > 0
        assert f.severity == "info" and "share the host's cores" in f.recommendation.cost
    (f,) = findings(loaded_profile, "parallel/comm_bound", "exposed-communication")
    # one 8 MiB gradient all-reduce per step: 2 x 8 MiB x 7/8 through each device
    (row,) = f.evidence["collectives"]
    assert row["opcode"] == "all-reduce" and row["bytes_per_device"] == pytest.approx(2 * 8 * 2**20 * 7 / 8, rel=0.01)
    assert "more work per synchronization" in f.recommendation.text
    (f,) = findings(loaded_profile, "parallel/fsdp", "exposed-communication")
    assert "fewer, larger collectives" in f.recommendation.text     # 25 small all-gathers and all-to-alls


def test_exposed_communication_silent_where_compute_or_waiting_dominates(loaded_profile):
    for name in ("parallel/compute_bound", "parallel/straggler", "transformer_scan"):
        assert not findings(loaded_profile, name, "exposed-communication"), name


def test_device_imbalance_names_the_straggler(loaded_profile):
    (f,) = findings(loaded_profile, "parallel/straggler", "device-imbalance")
    ev = f.evidence
    assert ev["straggler"] == "cpu:5" and ev["host"] == "vm"
    assert ev["ratio"] > 5 and ev["straggler_wait_ms"] < 0.5 * ev["typical_wait_ms"]
    assert ev["extra_time_in"] and f.source and f.source.endswith("straggler.py:25")
    assert "cpu:5" in f.title and "ms" in f.title


def test_device_imbalance_never_blames_a_balanced_program(loaded_profile):
    # core sharing makes these devices' compute differ by up to 2x for the same work
    for name in ("parallel/compute_bound", "parallel/data_parallel", "parallel/fsdp", "parallel/comm_bound",
                 "corpus/sharded_jit_warm", "corpus/pmap_warm", "transformer_scan"):
        assert not findings(loaded_profile, name, "device-imbalance"), name


def test_device_imbalance_names_the_slow_host(loaded_profile):
    (f,) = findings(loaded_profile, "parallel/two_hosts_straggler", "device-imbalance")
    assert f.evidence["host"] == "host1" and f.evidence["hosts"] == 2
    assert f.evidence["slow_host"] == "host1" and f.title.startswith("straggler host host1: its 4 devices")
    assert "look at host host1" in f.recommendation.text
    assert not findings(loaded_profile, "parallel/two_hosts", "device-imbalance")


def test_device_imbalance_names_a_host_that_launches_late(loaded_profile):
    """host1 sleeps 40 ms per step before launching it (a slow input pipeline): same compute, its
    devices idle while host0's wait in the gradient all-reduce."""
    (f,) = findings(loaded_profile, "parallel/two_hosts_slow_input", "device-imbalance")
    ev = f.evidence
    assert ev["host"] == "host1" and len(ev["devices"]) == 4
    assert ev["extra_idle_ms"] > 5 and ev["others_wait_ms"] > 2 * ev["wait_ms"]
    assert "input pipeline" in f.recommendation.text and "host host1" in f.title


def test_device_imbalance_blames_a_compile_on_the_late_host(loaded_profile):
    """The same late host, compiling inside its steps (set by hand on a copy): the cause is the compile."""
    import copy

    from advisor.rules import device_imbalance

    profile = copy.deepcopy(loaded_profile("parallel/two_hosts_slow_input")[0].profile)
    profile.hosts[1].compile_in_steps_ns = 20e6 * len(profile.hosts[1].steps)
    profile.views.pop("activity", None)      # computed from the facts before they were set
    (f,) = device_imbalance.check(profile)
    assert f.evidence["likely_cause"] == "compile" and "recompilation" in f.recommendation.text
