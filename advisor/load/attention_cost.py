"""FLOPs of fused attention custom calls (cuDNN's flash attention through XLA, Transformer Engine).

The HLO says nothing of the work inside these calls, but their configs give the problem: batch B,
heads H, query and key lengths Tq and Tk, head sizes D (queries and keys) and Dv (values), and the
mask. Counted as the matmuls they run, the convention of FlashAttention's papers:
- forward: 2·B·H·Tq·Tk·D for Q·Kᵀ plus 2·B·H·Tq·Tk·Dv for P·V (4·B·H·T²·D when D = Dv);
- a causal mask computes only the scores on or below the diagonal: half of them; a sliding window
  of W keys limits each query to W of the Tk keys;
- backward: 2.5 times the forward (five matmuls of that size to the forward's two); the softmax and
  the recomputation of the scores are not counted, as in those papers.
Padding and segment masks depend on the data: the full count is kept, and the view says so.
"""

from __future__ import annotations

import json
import re
from typing import Optional

CUDNN_PREFIX = "__cudnn$fmha"
TE_PREFIX = "te_fused_attn_"
BACKWARD_FACTOR = 2.5
# Transformer Engine's NVTE_Mask_Type values that are causal
_TE_CAUSAL = {2, 3, 4, 5}


def is_attention_target(target: str) -> bool:
    return target.startswith(CUDNN_PREFIX) or target.startswith(TE_PREFIX)


def attention_flops(target: str, backend_config: bytes, operand_dims: list[list[int]]) -> Optional[float]:
    """The call's FLOPs per execution (see the module docstring), or None where its config does not
    give the shapes."""
    if target.startswith(CUDNN_PREFIX):
        problem = _cudnn(backend_config, operand_dims)
    elif target.startswith(TE_PREFIX):
        problem = _transformer_engine(backend_config)
    else:
        return None
    if problem is None:
        return None
    b, h, tq, tk, d, dv, causal, window = problem
    keys = min(tk, window) if window and window > 0 else tk
    forward = 2.0 * b * h * tq * keys * (d + dv)
    if causal and not (window and window > 0):
        forward /= 2
    return forward * (BACKWARD_FACTOR if "backward" in target.lower() else 1.0)


def _cudnn(backend_config: bytes, operand_dims: list[list[int]]):
    try:
        cfg = json.loads(backend_config).get("cudnn_fmha_backend_config") or {}
        scores = [int(x) for x in cfg["intermediate_tensor_shape"]["dimensions"]]
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    if len(scores) != 4 or len(operand_dims) < 3:
        return None
    b, h, tq, tk = scores
    q, v = operand_dims[0], operand_dims[2]
    dims = (cfg.get("bmm1_dot_dimension_numbers") or {}).get("lhs_contracting_dimensions")
    try:
        d = q[int(dims[0])] if dims else q[-1]
    except (IndexError, ValueError, TypeError):
        d = q[-1] if q else 0
    dv = v[-1] if v else d
    mask = str(cfg.get("mask_type", ""))
    window = int(cfg.get("sliding_window_length") or 0)
    return b, h, tq, tk, d, dv, "CAUSAL" in mask.upper(), window


_ATTR = re.compile(r"(\w+)\s*=\s*(-?[0-9][0-9.e+-]*)")


def _transformer_engine(backend_config: bytes):
    """Transformer Engine's FFI attributes, as MLIR text (`{attn_heads = 16 : i64, ...}`)."""
    attrs = {k: v for k, v in _ATTR.findall(backend_config.decode("utf-8", "replace"))}
    try:
        b, h = int(attrs["input_batch"]), int(attrs["attn_heads"])
        tq, tk = int(attrs["q_max_seqlen"]), int(attrs["kv_max_seqlen"])
        d = int(attrs["qk_head_dim"])
        dv = int(attrs.get("v_head_dim", d))
        mask = int(attrs.get("mask_type", 0))
        left = int(attrs.get("window_size_left", -1))
    except (KeyError, ValueError):
        return None
    return b, h, tq, tk, d, dv, mask in _TE_CAUSAL, left + 1 if left >= 0 else 0
