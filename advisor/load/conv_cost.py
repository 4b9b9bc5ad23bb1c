"""FLOPs of the convolutions XLA hands to cuDNN (NVIDIA) or MIOpen (AMD, through the same targets).

XLA:GPU rewrites every convolution into a custom call (xla/service/gpu/cublas_cudnn.cc names the
targets; transforms/conv_rewriter.cc and cudnn_fused_conv_rewriter.cc write them) that keeps the
*forward* convolution's `window`, `convolution_dimension_numbers` and `feature_group_count`, whichever
pass it runs. What its operands and result are depends on the pass:

| target                                | operands                        | result (tuple element 0) |
| ------------------------------------- | ------------------------------- | ------------------------ |
| `__cudnn$convForward`                 | input, filter                   | output                   |
| `__cudnn$convBiasActivationForward`   | input, filter, bias[, side]     | output                   |
| `__cudnn$convForwardGraph`            | input, filter, ...              | output                   |
| `__cudnn$convBackwardInput`           | output gradient, filter         | input gradient           |
| `__cudnn$convBackwardFilter`          | input, output gradient          | filter gradient          |

(the tuple's last element is the library's scratch space). So the forward problem is found again
(input, filter, output, read through the dimension numbers: any layout, NCHW or NHWC) and every
pass is counted as the implicit GEMM the library runs for it, the same size for all three:

    2 x batch x output features x input features per group x kernel taps x output positions

(the paper count: the taps that fall on the padding are multiplied too, as zeros; XLA's cost
analysis of a plain `convolution` leaves them out, about 2% for a 3x3 'SAME' conv on 64x64). A
fused epilogue adds its elementwise work per output element: the bias add, the activation, and
the side input's scaled add and the result's scale where the backend config asks for them.
"""

from __future__ import annotations

import json
import math
from typing import Optional

FORWARD = "__cudnn$convForward"
BIAS_ACTIVATION = "__cudnn$convBiasActivationForward"
FORWARD_GRAPH = "__cudnn$convForwardGraph"
BACKWARD_INPUT = "__cudnn$convBackwardInput"
BACKWARD_FILTER = "__cudnn$convBackwardFilter"
# target -> which of (input, filter, output) are operand 0, operand 1 and the result
_ROLES = {FORWARD: ("x", "w", "y"), BIAS_ACTIVATION: ("x", "w", "y"), FORWARD_GRAPH: ("x", "w", "y"),
          BACKWARD_INPUT: ("y", "w", "x"), BACKWARD_FILTER: ("x", "y", "w")}
# activations cuDNN applies as a transcendental function (the others are comparisons)
_TRANSCENDENTAL_ACTIVATIONS = ("kSigmoid", "kTanh", "kElu", "kGeluExact")


def is_conv_target(target: str) -> bool:
    return target in _ROLES


def conv_cost(ins, operand_dims: list[Optional[list[int]]], result_dims: list[int]) -> Optional[tuple[float, float]]:
    """(FLOPs, transcendentals) of one execution of a cuDNN convolution call, or None where its shapes
    do not fit its dimension numbers."""
    roles = _ROLES.get(ins.custom_call_target)
    if roles is None or len(operand_dims) < 2 or operand_dims[0] is None or operand_dims[1] is None:
        return None
    shapes = dict(zip(roles, (operand_dims[0], operand_dims[1], result_dims)))
    x, w, y = shapes["x"], shapes["w"], shapes["y"]
    dn = ins.convolution_dimension_numbers
    try:
        batch = x[dn.input_batch_dimension]
        out_features = y[dn.output_feature_dimension]
        in_per_group = w[dn.kernel_input_feature_dimension]
        taps = math.prod(w[d] for d in dn.kernel_spatial_dimensions)
        positions = math.prod(y[d] for d in dn.output_spatial_dimensions)
    except IndexError:
        return None
    batch //= max(int(ins.batch_group_count), 1)
    flops = 2.0 * batch * out_features * in_per_group * taps * positions
    trans = 0.0
    if ins.custom_call_target == BIAS_ACTIVATION:
        epilogue, trans = _epilogue(ins.backend_config, len(operand_dims))
        flops += epilogue * math.prod(y)
        trans *= math.prod(y)
    return flops, trans


def _epilogue(backend_config: bytes, operands: int) -> tuple[int, int]:
    """(FLOPs, transcendentals) per output element of a fused conv's epilogue."""
    try:
        cfg = json.loads(backend_config or b"{}").get("cudnn_conv_backend_config") or {}
    except (ValueError, AttributeError):
        cfg = {}
    flops, trans = 1, 0                         # the bias add
    if float(cfg.get("conv_result_scale", 1) or 0) != 1.0:
        flops += 1
    if operands > 3 and float(cfg.get("side_input_scale", 0) or 0) != 0.0:
        flops += 2                              # scale and add the side input
    mode = str(cfg.get("activation_mode", "kNone"))
    if mode in _TRANSCENDENTAL_ACTIVATIONS:
        trans += 1
    elif mode not in ("kNone", "", "0"):
        flops += 1
    return flops, trans
