"""replicated-state judges the whole train state, parameters and every optimizer leaf: FSDP parameters
beside AdamW moments built by jax.jit(tx.init) with a replicated out_sharding (tests/parallel/
_fsdp_replicated_optimizer.py, recorded here on 8 simulated CPU devices) fire it; the same program with
the moments sharded like the parameters does not."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

PROGRAM = Path(__file__).parent / "parallel" / "_fsdp_replicated_optimizer.py"


def _record(tmp_path, layout):
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "XLA_FLAGS": "--xla_force_host_platform_device_count=8"}
    subprocess.run([sys.executable, str(PROGRAM), str(tmp_path / layout), layout], env=env, check=True,
                   capture_output=True, timeout=300)
    from advisor.engine import analyze_path
    (analysis,) = analyze_path(tmp_path / layout)
    return analysis


@pytest.mark.slow
def test_replicated_optimizer_state_beside_sharded_parameters_fires_and_sharded_state_is_silent(tmp_path):
    replicated = _record(tmp_path, "replicated")
    (f,) = [f for f in replicated.findings if f.rule == "replicated-state"]
    ev = f.evidence
    # AdamW's two moments of 4 weights 512 x 512 float32 (8 MiB) whole on each device; the weights split 8 ways
    assert ev["devices"] == 8 and 8 * 2**20 <= ev["state_bytes_per_device"] < 8.5 * 2**20
    assert ev["split_state_bytes_per_device"] == 4 * 512 * 512 * 4 // 8
    assert "optimizer leaves beside sharded parameters" in f.title
    assert "shard the optimizer state like the parameters" in f.recommendation.text
    state = replicated.profile.views["parallelism"].state
    assert state.replicated_over == ["data"] and state.replicated_bytes == ev["state_bytes_per_device"]
    sharded = _record(tmp_path, "sharded")
    assert not [f for f in sharded.findings if f.rule == "replicated-state"]
    assert sharded.profile.views["parallelism"].state.replicated_over == []
