"""Convolutions as XLA:GPU runs them (cuDNN on NVIDIA, MIOpen on AMD): custom calls counted from the
forward convolution's window, dimension numbers and feature groups they keep
(advisor/load/conv_cost.py), each against its paper count 2·N·Cout·(Cin/groups)·kernel taps·output
positions; the calls are built from the convolution JAX lowers to HLO, laid out as XLA's conv
rewriter writes them. Then the traces: the synthetic H200 CNN of issue 39 (fixtures/gpu/cnn.py) and
the real MI300X conv trace from TraceLens (fixtures/gpu-traces/jax08_conv)."""

import json
import math

import jax
import jax.numpy as jnp
import pytest

from advisor.load.conv_cost import _ROLES
from advisor.load.hlo_cost import ModuleCost
from advisor.load.hlo_proto import HloProto
from advisor.model import CONV_TARGETS
from conftest import FIXTURES, analyze_json, rule_ids

TUPLE, U8 = 13, 6


def lowered_conv(x_shape, w_shape, dn=("NHWC", "HWIO", "NHWC"), strides=(1, 1), padding="SAME",
                 rhs_dilation=(1, 1), groups=1):
    """The HLO module JAX lowers for one convolution (bf16), and its convolution instruction."""
    def conv(x, w):
        return jax.lax.conv_general_dilated(x, w, strides, padding, rhs_dilation=rhs_dilation,
                                            dimension_numbers=dn, feature_group_count=groups)
    x, w = jnp.zeros(x_shape, jnp.bfloat16), jnp.zeros(w_shape, jnp.bfloat16)
    proto = HloProto()
    proto.hlo_module.ParseFromString(jax.jit(conv).lower(x, w).compiler_ir("hlo").as_serialized_hlo_module_proto())
    entry = next(c for c in proto.hlo_module.computations if c.name == proto.hlo_module.entry_computation_name)
    conv_ins = next(i for i in entry.instructions if i.opcode == "convolution")
    return proto.hlo_module, entry, conv_ins


def cudnn_call(target, x_shape, w_shape, config=None, side_input=False, **conv):
    """(FLOPs, transcendentals) of the custom call XLA writes for this convolution's pass `target`:
    forward on (x, w) -> y, input gradient on (dy, w) -> dx, filter gradient on (x, dy) -> dw, each
    returning (result, u8 scratch) and keeping the forward window and dimension numbers."""
    module, entry, ins = lowered_conv(x_shape, w_shape, **conv)
    by_id = {i.id: i for i in entry.instructions}
    x, w = by_id[ins.operand_ids[0]], by_id[ins.operand_ids[1]]
    y = entry.instructions.add()
    y.CopyFrom(x)
    y.name, y.id, y.parameter_number = "dy", max(by_id) + 1, 2
    y.shape.CopyFrom(ins.shape)
    roles = {"x": x, "w": w, "y": y}
    operands, result = {"__cudnn$convBackwardInput": (("y", "w"), "x"),
                        "__cudnn$convBackwardFilter": (("x", "y"), "w")}.get(target, (("x", "w"), "y"))
    ins.opcode, ins.custom_call_target = "custom-call", target
    del ins.operand_ids[:]
    ins.operand_ids.extend(roles[r].id for r in operands)
    if side_input:                           # bias and side input of a fused conv
        for k, dims in enumerate(([ins.shape.dimensions[ins.convolution_dimension_numbers.output_feature_dimension]],
                                  list(ins.shape.dimensions))):
            extra = entry.instructions.add()
            extra.CopyFrom(x)
            extra.name, extra.id, extra.parameter_number = f"extra{k}", max(by_id) + 2 + k, 3 + k
            del extra.shape.dimensions[:]
            extra.shape.dimensions.extend(dims)
            ins.operand_ids.append(extra.id)
    elif target == "__cudnn$convBiasActivationForward":
        bias = entry.instructions.add()
        bias.CopyFrom(x)
        bias.name, bias.id, bias.parameter_number = "bias", max(by_id) + 2, 3
        del bias.shape.dimensions[:]
        bias.shape.dimensions.append(ins.shape.dimensions[ins.convolution_dimension_numbers.output_feature_dimension])
        ins.operand_ids.append(bias.id)
    shape = roles[result].shape
    ins.shape.Clear()
    ins.shape.element_type = TUPLE
    ins.shape.tuple_shapes.add().CopyFrom(shape)
    scratch = ins.shape.tuple_shapes.add()
    scratch.element_type, scratch.dimensions[:] = U8, [1 << 20]
    if config is not None:
        ins.backend_config = json.dumps({"cudnn_conv_backend_config": config}).encode()
    cost = ModuleCost(module).costs[ins.name]
    return cost.flops, cost.transcendentals


PASSES = ("__cudnn$convForward", "__cudnn$convBackwardInput", "__cudnn$convBackwardFilter")


def test_every_conv_target_has_its_operands_laid_out():
    assert set(_ROLES) == CONV_TARGETS


@pytest.mark.parametrize("target", PASSES)
@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
def test_each_pass_counts_the_forward_convolution(target, layout):
    """3x3 'SAME' on 8 images of 16x16, 32 -> 64 channels: 2·8·64·32·9·16·16 = 75.5 MFLOP for the
    forward pass, the input gradient and the filter gradient alike, in either layout."""
    paper = 2 * 8 * 64 * 32 * 9 * 16 * 16
    if layout == "NHWC":
        shapes, dn = ((8, 16, 16, 32), (3, 3, 32, 64)), ("NHWC", "HWIO", "NHWC")
    else:
        shapes, dn = ((8, 32, 16, 16), (64, 32, 3, 3)), ("NCHW", "OIHW", "NCHW")
    assert cudnn_call(target, *shapes, dn=dn) == (paper, 0.0)


@pytest.mark.parametrize("target", PASSES)
def test_grouped_and_depthwise(target):
    """Feature groups divide the input features each output sees: 4 groups of 32 -> 64 channels on 16x16
    is 2·8·64·(32/4)·9·256; depthwise (32 groups, multiplier 2) is 2·8·64·1·9·256."""
    assert cudnn_call(target, (8, 16, 16, 32), (3, 3, 8, 64), groups=4)[0] == 2 * 8 * 64 * 8 * 9 * 256
    assert cudnn_call(target, (8, 16, 16, 32), (3, 3, 1, 64), groups=32)[0] == 2 * 8 * 64 * 1 * 9 * 256


@pytest.mark.parametrize("target", PASSES)
def test_strides_dilation_and_padding(target):
    """The output positions decide: stride 2 'SAME' on 17x17 gives 9x9; 'VALID' 3x3 gives 15x15; a
    window dilated by 2 'SAME' keeps 17x17 (taps are still 3x3)."""
    x, w = (2, 17, 17, 8), (3, 3, 8, 16)
    per_position = 2 * 2 * 16 * 8 * 9
    assert cudnn_call(target, x, w, strides=(2, 2))[0] == per_position * 9 * 9
    assert cudnn_call(target, x, w, padding="VALID")[0] == per_position * 15 * 15
    assert cudnn_call(target, x, w, rhs_dilation=(2, 2))[0] == per_position * 17 * 17


def test_without_padding_the_count_is_xlas():
    """Where no tap falls on the padding, the paper count is XLA's own cost analysis of the plain
    convolution (on CPU): the two conventions differ only in the padding's taps."""
    def conv(x, w):
        return jax.lax.conv_general_dilated(x, w, (1, 1), "VALID", dimension_numbers=("NHWC", "HWIO", "NHWC"))
    x, w = jnp.zeros((4, 12, 12, 16), jnp.float32), jnp.zeros((3, 3, 16, 8), jnp.float32)
    analysis = jax.jit(conv).lower(x, w).compile().cost_analysis()
    xla = (analysis[0] if isinstance(analysis, list) else analysis)["flops"]
    assert cudnn_call("__cudnn$convForward", (4, 12, 12, 16), (3, 3, 16, 8), padding="VALID")[0] == xla


def test_fused_epilogue_adds_its_elementwise_work():
    """conv + bias + ReLU (`__cudnn$convBiasActivationForward`): the convolution and, per output
    element, the bias add and the ReLU; with a side input scaled by 0.5 and the result scaled, two more
    and one more; a tanh activation is a transcendental."""
    x, w = (8, 16, 16, 32), (3, 3, 32, 64)
    conv, outputs = 2 * 8 * 64 * 32 * 9 * 256, 8 * 16 * 16 * 64
    target = "__cudnn$convBiasActivationForward"
    relu = {"activation_mode": "kRelu", "conv_result_scale": 1, "side_input_scale": 0}
    assert cudnn_call(target, x, w, config=relu) == (conv + 2 * outputs, 0.0)
    scaled = {"activation_mode": "kRelu", "conv_result_scale": 2, "side_input_scale": 0.5}
    assert cudnn_call(target, x, w, config=scaled, side_input=True) == (conv + 5 * outputs, 0.0)
    tanh = {"activation_mode": "kTanh", "conv_result_scale": 1, "side_input_scale": 0}
    assert cudnn_call(target, x, w, config=tanh) == (conv + outputs, float(outputs))


def test_a_call_whose_shapes_do_not_fit_is_left_uncounted():
    module, entry, ins = lowered_conv((8, 16, 16, 32), (3, 3, 32, 64))
    ins.opcode, ins.custom_call_target = "custom-call", "__cudnn$convForward"
    ins.convolution_dimension_numbers.output_feature_dimension = 9
    assert ModuleCost(module).costs[ins.name].flops is None


# -- the traces ------------------------------------------------------------------------------------

H200_PAPER_PER_PASS = 2 * 64 * 256 * 256 * 9 * 64 * 64          # 3.092e11
H200_PAPER_PER_STEP = (6 + 5 + 6) * H200_PAPER_PER_PASS          # 5.257e12: x has no gradient


@pytest.mark.parametrize("fixture", ["gpu_cnn_h200", "gpu_cnn_h200_nchw"])
def test_the_h200_cnn_reads_its_paper_count_and_a_bound(loaded_profile, fixture):
    """Issue 39's CNN (6 convs of 3x3, 256 channels, 64x64, batch 64, bf16): 17 passes of 3.092e11 FLOP
    = 5.257e12 per step, plus the ReLUs, the loss and the update (1.5 GFLOP); the issue's range is
    5.26e12 to 5.57e12 (17 to 18 passes, at 3 significant digits). Every convolution is compute-bound
    and nothing is left uncounted."""
    (analysis,) = loaded_profile(fixture)
    eff = analysis.summary["efficiency"]
    assert eff["flops_per_step"] == pytest.approx(H200_PAPER_PER_STEP, rel=1e-3)
    assert 5.26e12 <= float(f"{eff['flops_per_step']:.3g}") <= 5.57e12
    assert eff["unknown_flops_time_share"] == 0
    assert eff["matmul_dtype"] == "bf16" and eff["mfu"] is not None
    convs = [op for op in eff["ops"] if op["category"] == "convolution"]
    assert len(convs) == 17
    assert all(op["bound"] == "compute" and op["flops"] == H200_PAPER_PER_PASS * op["executions"] for op in convs)
    categories = {c["category"]: c for c in eff["categories"]}
    assert categories["convolution"]["bound"] == "compute"
    assert categories["convolution"]["flops"] / 3 == pytest.approx(H200_PAPER_PER_STEP)


def test_the_mi300x_conv_has_no_op_without_a_flop_count(loaded_profile):
    """TraceLens's jax_conv_minimal_08 (8 MI300X, JAX 0.8): a 3-D convolution per GPU of input
    1x16x32x60x104 (NCDHW), 5120 filters of 16x1x2x2, stride 1x2x2, padding 1, output
    1x5120x34x31x53: 2·5120·16·4·(34·31·53) = 3.661e10 FLOP per execution (the 55,862 x 5,120 x 64
    GEMM MIOpen runs after its Im3d2Col), 5 executions in the window."""
    (analysis,) = loaded_profile(FIXTURES / "gpu-traces" / "jax08_conv")
    eff = analysis.summary["efficiency"]
    assert eff["unknown_flops_time_share"] == 0
    assert all(op["flops"] is not None for op in eff["ops"])
    (conv,) = [op for op in eff["ops"] if op["category"] == "convolution"]
    per_execution = 2 * 5120 * 16 * 4 * (34 * 31 * 53)
    assert conv["flops"] / conv["executions"] == per_execution
    assert conv["executions"] == 5 and conv["bound"] == "memory"
    assert eff["matmul_dtype"] == "bf16"
    assert math.isclose(eff["flops_per_step"], 8 * 5 * per_execution, rel_tol=1e-9)


@pytest.mark.parametrize("name, findings", [("gpu_cnn_h200", set()), ("gpu_cnn_h200_nchw", set()),
                                            ("gpu-traces/jax08_conv", {"layout-copies"})])
def test_the_conv_traces_read_as_xprof_reads_them(name, findings):
    """xprof's own tools on the same files: the kernels, their time and the allocators' peaks match,
    and xprof resolves the synthetic kernels to the HLO's custom calls (the module is one it parses).
    The MI300X trace's transposes into and out of the NCDHW layout take 54% of its op time:
    layout-copies says so; nothing else fires."""
    from test_gpu import check_against_xprof, xplane, xprof_tool

    path = xplane(FIXTURES / name)
    doc = analyze_json(path)
    (run,) = doc["runs"]
    assert rule_ids(doc) == findings
    check_against_xprof(path, run)
    rows = xprof_tool(path, "hlo_stats")["rows"]
    assert rows, "xprof found no XLA ops"


def test_the_cnn_fixtures_are_what_their_builder_writes(tmp_path):
    """fixtures/gpu/cnn.py rebuilds the committed traces byte for byte (the convolution's window and
    dimension numbers lowered again by this JAX, the module parsed by this jaxlib's HLO parser)."""
    import sys
    sys.path.insert(0, str(FIXTURES / "gpu"))
    import cnn

    for name, layout in cnn.SCENARIOS.items():
        built = cnn.build(name, layout, root=tmp_path)
        assert built.read_bytes() == (FIXTURES / name / "plugins/profile/run/gpuhost.xplane.pb").read_bytes(), name
