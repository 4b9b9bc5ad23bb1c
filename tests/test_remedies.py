"""Typed remedies: the workloads' config map, the cost-aware severity policy, advice in the user's terms.

Rules run in-process on the committed fixtures, each loaded once.
"""

import copy

import pytest

from advisor import workloads
from advisor.engine import analyze_path
from advisor.memory_plan import candidates
from advisor.remedies import Kind, Remedy, severity
from advisor.rules import BY_ID
from conftest import FIXTURES

MiB = 1024 * 1024


@pytest.fixture(scope="module")
def profiles():
    out = {}
    for name in ("transformer_scan", "transformer_unrolled", "transformer_remat_nodonate", "transformer_remat"):
        (analysis,) = analyze_path(FIXTURES / name)
        out[name] = analysis.profile
    return out


def run(profile, rule, **changes):
    p = copy.copy(profile)
    p.notes = []
    for k, v in changes.items():
        setattr(p, k, v)
    return BY_ID[rule].run(p)


def test_workloads_map_remedies_to_their_own_keys():
    t = workloads.resolve("transformer", "tiny", [])
    assert workloads.remedy_config("transformer", Remedy(Kind.REMAT, "blocks"), t) == {"model.remat": ["MLP", "Attn"]}
    assert workloads.remedy_config("transformer", Remedy(Kind.UNROLL_LAYERS), t) == {"model.scan_layers": False}
    assert workloads.remedy_config("transformer", Remedy(Kind.DONATE), t) == {}   # the tiny preset donates
    assert workloads.remedy_config("transformer", Remedy(Kind.BFLOAT16), t) == {"model.dtype": "bfloat16"}
    m = workloads.resolve("mlp", "tiny", ["train.donate=false"])
    assert workloads.remedy_config("mlp", Remedy(Kind.REMAT, "blocks"), m) == {"model.remat": True}
    assert workloads.remedy_config("mlp", Remedy(Kind.UNROLL_LAYERS), m) == {}   # no layer scan to unroll
    assert workloads.remedy_config("mlp", Remedy(Kind.DONATE), m) == {"train.donate": True}


def test_preflight_candidates_come_from_the_map():
    t = workloads.resolve("transformer", "tiny", ["train.donate=false"])
    assert candidates("transformer", t) == [
        {"model.dtype": "bfloat16"}, {"model.remat": ["MLP", "Attn"]}, {"train.donate": True},
        {"optimizer.num_minibatches": 2}, {"optimizer.num_minibatches": 4}, {"data.batch_size": 4}]


def test_remedy_is_serialized_with_the_recommendation(profiles):
    (f,) = run(profiles["transformer_scan"], "missing-remat")
    assert f.recommendation.to_json()["remedy"] == {"kind": "remat", "target": "blocks"}
    assert f.recommendation.config == {"model.remat": ["MLP", "Attn"]}


def test_costly_fix_is_a_warning_only_under_memory_pressure(profiles):
    p = profiles["transformer_scan"]
    (relaxed,) = run(p, "missing-remat", device_capacity_bytes=20 * 1024 * MiB)
    assert relaxed.severity == "info" and "no memory pressure" in relaxed.recommendation.text
    (pressed,) = run(p, "missing-remat", device_capacity_bytes=p.memory.peak_bytes + MiB)
    assert pressed.severity == "warning"
    assert severity(p, Remedy(Kind.REMAT), 0.9) == "info"   # no capacity known: no pressure shown


def test_free_fix_is_reported_below_ten_percent_with_severity_by_share(profiles):
    p = profiles["transformer_remat_nodonate"]
    (f,) = run(p, "missing-buffer-donation")
    material = f.evidence["share_of_peak"] >= 0.1 and f.evidence["donatable_bytes"] >= 16 * MiB
    assert f.severity == ("warning" if material else "info")
    assert f.recommendation.config == {"train.donate": True}
    small = copy.copy(p.memory)
    small.peak_bytes = f.evidence["donatable_bytes"] * 20     # the state is 5% of the peak: still reported
    (f,) = run(p, "missing-buffer-donation", memory=small)
    assert f.severity == "info"


def test_no_bfloat16_change_on_cpu(profiles):
    p = profiles["transformer_scan"]
    assert p.backend == "cpu"
    (f,) = run(p, "float32-activations", device_capacity_bytes=p.memory.peak_bytes)
    assert f.severity == "info" and f.recommendation.config == {} and f.recommendation.remedy is None
    assert "no change recommended" in f.recommendation.text


def test_unrolled_layers_get_remat_inside_a_scan(profiles):
    (f,) = run(profiles["transformer_unrolled"], "missing-remat")
    assert f.evidence["layers"] == "unrolled"
    assert f.recommendation.remedy == Remedy(Kind.REMAT, "scanned_blocks")
    assert f.recommendation.config == {"model.scan_layers": True, "model.remat": ["MLP", "Attn"]}


def test_users_own_code_gets_flax_terms_and_no_config(profiles):
    (f,) = run(profiles["transformer_scan"], "missing-remat", run_metadata={})
    text = f.recommendation.text
    assert "nn.remat" in text and "nnx.remat" in text and "jax.checkpoint" in text
    assert f.recommendation.config == {}
    assert f.source and f.source in text
    (d,) = run(profiles["transformer_remat_nodonate"], "missing-buffer-donation", run_metadata={})
    # the step's own arguments, by the names JAX gives its parameters (the bundled step(state, metrics, batch))
    assert 'donate_argnames=("state", "metrics")' in d.recommendation.text and "nnx.jit" in d.recommendation.text
    assert d.recommendation.config == {}
