"""FLOPs and bytes from the HLO (advisor/load/hlo_cost.py) against XLA's own cost analysis
(jaxlib's `hlo_module_cost_analysis`) on CPU modules, against the paper count where XLA differs,
and on the GEMM custom-calls of the real GPU traces.

Differences from XLA's cost analysis, each with its cause (docs/efficiency.md lists them too):
- while loops: XLA counts a loop body once; advisor multiplies it by the loop's known trip count
  (a scan over 5 layers does 5 layers of work).
- fusion bytes: advisor counts each operand read and the result written once at the fusion's
  boundary; XLA weighs operands by how much of them the fused ops touch (same totals on the
  programs below).
- custom calls: XLA gives them no FLOPs; advisor counts GEMM calls (cuBLAS, hipBLASLt) as dots.
"""

import math

import jax
import jax.numpy as jnp
import pytest

from advisor.load.hlo_cost import gemm_contracting_dims, module_cost
from advisor.load.hlo_proto import HloProto
from conftest import FIXTURES
from efficiency_programs import mlp_scanned, mlp_unrolled


def _module(fn, *args):
    compiled = jax.jit(fn).lower(*args).compile()
    module = compiled.runtime_executable().hlo_modules()[0]
    proto = HloProto()
    proto.hlo_module.ParseFromString(module.as_serialized_hlo_module_proto())
    return proto.hlo_module, module


def totals(module):
    costs, runs, _, _ = module_cost(module)
    flops = sum((c.flops or 0.0) * (runs[n] or 1.0) for n, c in costs.items())
    trans = sum(c.transcendentals * (runs[n] or 1.0) for n, c in costs.items())
    nbytes = sum(c.bytes * (runs[n] or 1.0) for n, c in costs.items())
    return flops, trans, nbytes


def xla_cost(module):
    from jax._src.lib import xla_client

    out = xla_client._xla.hlo_module_cost_analysis(jax.devices()[0].client, module)
    return out.get("flops", 0.0), out.get("transcendentals", 0.0), out.get("bytes accessed", 0.0)


def _conv(x, w):
    return jax.lax.conv_general_dilated(x, w, (2, 2), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))


W = jnp.ones((4, 64, 64))
X = jnp.ones((32, 64))
LOOP_FREE = {
    "dot and tanh": (lambda a, b: jnp.tanh(a @ b).sum(), jnp.ones((64, 128)), jnp.ones((128, 32))),
    "batched dot": (lambda a, b: jnp.einsum("bij,bjk->bik", a, b), jnp.ones((4, 64, 128)), jnp.ones((4, 128, 32))),
    "strided padded conv": (_conv, jnp.ones((2, 17, 17, 8)), jnp.ones((3, 3, 8, 16))),
    "softmax": (lambda x: jax.nn.softmax(x).sum(), jnp.ones((128, 256))),
    "mlp training step": (jax.grad(mlp_unrolled), [W[i] for i in range(4)], X),
}


@pytest.mark.parametrize("name", LOOP_FREE)
def test_loop_free_programs_match_xla_cost_analysis(name):
    fn, *args = LOOP_FREE[name]
    ours, module = _module(fn, *args)
    flops, trans, nbytes = totals(ours)
    x_flops, x_trans, x_bytes = xla_cost(module)
    assert flops == pytest.approx(x_flops, rel=1e-9)
    assert trans == pytest.approx(x_trans, rel=1e-9)
    assert nbytes == pytest.approx(x_bytes, rel=0.02)


def test_scan_counts_each_trip_where_xla_counts_the_body_once():
    ours, module = _module(mlp_scanned, W, X)
    flops, trans, _ = totals(ours)
    paper = 4 * 2 * 32 * 64 * 64            # four layers of [32,64] @ [64,64]
    assert flops == pytest.approx(paper, rel=0.05)
    assert trans == 4 * 32 * 64             # tanh per layer
    x_flops, x_trans, _ = xla_cost(module)
    assert x_trans == 32 * 64               # XLA: the body once
    assert x_flops < flops / 3


def test_unknown_trip_count_is_none():
    def loop(x):
        return jax.lax.while_loop(lambda c: c[1].sum() < 100.0, lambda c: (c[0] + 1, c[1] * 2.0), (0, x))[1]

    ours, _ = _module(loop, jnp.ones(8))
    _, runs, _, _ = module_cost(ours)
    assert None in runs.values() and 1.0 in runs.values()


def test_gemm_backend_config_parsing():
    cfg = (b'{"operation_queue_id":"0","gemm_backend_config":{"alpha_real":1,"dot_dimension_numbers":'
           b'{"lhs_contracting_dimensions":["1"],"rhs_contracting_dimensions":["0"],"lhs_batch_dimensions":[]}}}')
    assert gemm_contracting_dims(cfg) == [1]
    assert gemm_contracting_dims(cfg[:-3]) == [1]      # cut short: still read
    assert gemm_contracting_dims(b"") is None


@pytest.fixture(scope="module")
def gpu_runs(loaded_profile):
    traces = FIXTURES / "gpu-traces"
    if not (traces / "jax08_attention").exists():
        pytest.skip("fixtures/gpu-traces is absent")
    return {name: loaded_profile(traces / name)[0] for name in ("jax08_attention", "te_fused_attn")}


def test_gemm_custom_calls_on_real_gpu_traces_have_flops(gpu_runs):
    """Every cuBLAS/hipBLASLt call in the real ROCm traces gets 2 x result elements x K, K read from
    its backend config's contracting dimensions; xprof 2.24.2 gives these calls 0 FLOPs."""
    seen = 0
    for analysis in gpu_runs.values():
        for module in analysis.profile.modules.values():
            for ins in module.instructions.values():
                if ins.opcode != "custom-call" or "cublas" not in ins.custom_call_target:
                    continue
                seen += 1
                assert ins.cost.flops and ins.cost.flops > 0
                k = ins.cost.flops / 2 / math.prod(ins.dims)
                assert k == int(k) and k >= 64
    assert seen >= 5


def test_fused_attention_flops_from_the_config(gpu_runs):
    """Transformer Engine's calls (B=2, H=16, T=2048, D=Dv=128, causal mask): the forward's two
    matmuls over half the scores, the backward at 2.5x (FlashAttention's convention)."""
    profile = gpu_runs["te_fused_attn"].profile
    calls = [i for m in profile.modules.values() for i in m.instructions.values()
             if i.custom_call_target.startswith("te_fused_attn")]
    forward = 2 * 2 * 16 * 2048 * 2048 * (128 + 128) / 2
    assert calls and all(i.cost.bytes > 0 and i.is_matmul for i in calls)
    for i in calls:
        assert i.cost.flops == (forward * 2.5 if "backward" in i.custom_call_target else forward)
