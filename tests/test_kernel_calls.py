"""Kernels XLA does not describe (advisor/load/kernel_calls.py): Pallas's Triton kernels as the
custom calls JAX lowers them to for an NVIDIA GPU (lowered here on the CPU: no GPU is needed to
lower), and XLA's own Triton fusions on the real H100 trace (fixtures/h100-traces/transformer_seed)."""

import json
import re

import jax
import jax.numpy as jnp
import pytest
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plt

from advisor.categories import categorize
from advisor.load.hlo import parse_module
from advisor.load.hlo_proto import HloProto
from advisor.load.xspace_slice import metadata_xspace, program_protos
from advisor.views import ops as ops_view
from conftest import FIXTURES


def _matmul_kernel(x_ref, y_ref, o_ref):
    o_ref[...] = jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)


def _add_one(x_ref, o_ref):
    o_ref[...] = x_ref[...] + 1.0


def pallas_module(kernel, name: str, out_shape, grid, in_specs, out_specs, *args):
    """The HLO module of a jitted `pallas_call` lowered for CUDA through Pallas's Triton backend."""
    kernel.__name__ = name
    call = pl.pallas_call(kernel, out_shape=out_shape, grid=grid, in_specs=in_specs, out_specs=out_specs,
                          compiler_params=plt.CompilerParams(num_warps=4))
    lowered = jax.jit(call).trace(*args).lower(lowering_platforms=("cuda",))
    proto = HloProto()
    proto.hlo_module.ParseFromString(lowered.compiler_ir("hlo").as_serialized_hlo_module_proto())
    module = parse_module(proto.SerializeToString(), 1)
    (call_ins,) = [i for i in module.instructions.values() if i.opcode == "custom-call"]
    return call_ins


def matmul_call(name: str):
    x = jax.ShapeDtypeStruct((256, 256), jnp.float16)
    return pallas_module(_matmul_kernel, name, jax.ShapeDtypeStruct((256, 256), jnp.float32), (2, 2),
                         [pl.BlockSpec((128, 256), lambda i, j: (i, 0)), pl.BlockSpec((256, 128), lambda i, j: (0, j))],
                         pl.BlockSpec((128, 128), lambda i, j: (i, j)), x, x)


def test_a_pallas_matmul_is_a_named_matmul_kernel_of_unknown_flops():
    ins = matmul_call("mm_kernel")
    assert ins.custom_call_target == "__gpu$xla.gpu.triton"
    assert ins.kernel == "mm_kernel" and ins.kernel_dot
    assert categorize(ins) == "matmul"
    assert ins.cost.flops is None, "the HLO does not hold the kernel's dot: its FLOPs stay unknown"
    assert ins.label == "Triton kernel mm_kernel (__gpu$xla.gpu.triton)"


def test_a_pallas_attention_kernel_is_attention():
    assert categorize(matmul_call("flash_attention_fwd")) == "attention"


def test_an_elementwise_pallas_kernel_stays_a_custom_call():
    x = jax.ShapeDtypeStruct((1024,), jnp.float32)
    ins = pallas_module(_add_one, "add_one", x, (8,), [pl.BlockSpec((128,), lambda i: (i,))],
                        pl.BlockSpec((128,), lambda i: (i,)), x)
    assert ins.kernel == "add_one" and not ins.kernel_dot
    assert categorize(ins) == "custom-call" and ins.cost.flops is None


# -- XLA's own Triton kernels on the H100 --------------------------------------------------------------

SEED = FIXTURES / "h100-traces" / "transformer_seed"
_KIND = re.compile(rb'"fusion_backend_config":\{"kind":"(__triton[a-z_]*)"')


@pytest.fixture(scope="module")
def seed_triton(loaded_profile):
    """The seed's op rows and the Triton fusion kind of each op that has one (from its HLO)."""
    (analysis,) = loaded_profile(SEED)
    profile = analysis.profile
    key = profile.step_module
    (xplane,) = [p for p in SEED.rglob("*.xplane.pb")]
    proto = HloProto()
    proto.ParseFromString(program_protos(metadata_xspace(xplane), {key})[key])
    kinds = {i.name: m.group(1).decode() for c in proto.hlo_module.computations for i in c.instructions
             if i.opcode == "fusion" and (m := _KIND.search(i.backend_config))}
    rows = [r for r in ops_view.of(profile).rows if r.module == key]
    return rows, kinds


def test_triton_gemm_fusions_are_matmuls_counted_from_their_dot(seed_triton):
    """Every Triton GEMM fusion that ran has its time, the matmul category, and 2·B·M·N·K FLOPs per
    execution from the dot its HLO holds."""
    rows, kinds = seed_triton
    gemms = [r for r in rows if kinds.get(r.name, "").startswith("__triton_") and "gemm" in kinds[r.name]]
    assert len(gemms) >= 10
    for r in gemms:
        b, m, n, k = r.instruction.matmul_dims
        assert r.time_ns > 0 and r.category == "matmul", r.name
        assert r.flops >= 2 * b * m * n * k * r.executions, r.name     # the dot and any fused epilogue


def test_triton_fusions_without_a_dot_are_counted_fusions(seed_triton):
    rows, kinds = seed_triton
    others = [r for r in rows if kinds.get(r.name) == "__triton"]
    assert others and all(r.flops is not None and r.category == "fusion" and r.time_ns > 0 for r in others)


def test_the_seed_reads_as_before(seed_triton, loaded_profile):
    """The shared H100 trace's figures do not move (fixtures/h100-traces/README.md)."""
    (analysis,) = loaded_profile(SEED)
    eff = analysis.summary["efficiency"]
    assert float(f"{eff['flops_per_step']:.4g}") == 3.953e13 and eff["mfu"] == pytest.approx(0.214, abs=5e-4)
    assert json.dumps(eff["unknown_flops_time_share"]) == "0.0"
