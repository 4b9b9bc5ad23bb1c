"""unfused-attention: attention over materialized [batch, heads, q, k] scores takes a material share of a GPU step.

## What it does
On an NVIDIA GPU, finds the attention a program computes with plain matmuls and a softmax: the
softmax ops over score arrays `[..., heads, q, k]` with q == k (the float32-attention-logits
rule's shape test, with an exponential inside), the masks, dropout and row reductions over those
scores, and the matmuls around them (the batched matmuls whose output is q x k, and those that
contract over the sequence into a q or k row of head size: scores times values and the backward
pass's four). It sums their measured time per step and, where advisor holds a rate measured for a
fused attention on the same GPU model, says what `jax.nn.dot_product_attention(...,
implementation="cudnn")` would take for the same work: the forward's matmul FLOPs as a fused
kernel counts them (halved under a causal mask, an iota comparison over [q, k] in the step), 2.5
times that for the backward, once more where the attention is rematted.

## Why is this bad?
Materialized scores are written to and read back from memory by every op between the two
matmuls: the mask, the softmax's max, exponential, sum and division, dropout, and the backward
pass's versions of each, each a memory-bound pass over B·H·T² elements. A fused (flash)
attention keeps the scores in on-chip memory, and with a causal mask skips the half above the
diagonal. Measured on one NVIDIA H100 (`fixtures/h100-traces/attention_cudnn`: `jax.grad` of
`jax.nn.dot_product_attention(q, k, v, is_causal=True, implementation="cudnn")`, bf16, B=16,
T=2048, H=16, D=128): advisor reads 298 TFLOP/s over its steps.

## Example
```python
scores = jnp.einsum("bqhd,bkhd->bhqk", q, k) / jnp.sqrt(d)
scores = jnp.where(causal_mask, scores, -1e9)
out = jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(scores.astype(jnp.float32)).astype(v.dtype), v)
```

## Use instead
```python
out = jax.nn.dot_product_attention(q, k, v, is_causal=True, implementation="cudnn")
```
Constraints (JAX's cuDNN path): q, k, v in float16 or bfloat16, laid out `[batch, seq, heads,
head_dim]`; head dims up to 128 and a multiple of 8 (up to 256 on Hopper with cuDNN 9.5 or
later); masks as `is_causal`, `query_seq_lengths` / `key_value_seq_lengths` (padding),
`local_window_size`, or a `bias` / boolean `mask` array; no dropout on the attention
probabilities. Cost: a code change, a dependency on cuDNN and its supported shapes; the kernel
computes the scores and their softmax in float32 inside (cuDNN's default compute type), so float32
logits chosen for stability stay float32. Gain: the unfused attention's measured time less the
fused kernel's estimated time.

## Options
- `min_share` (default 0.1): fire when the unfused attention takes at least this share of op time.

## Note
NVIDIA GPUs only (cuDNN). The fused time is an estimate from a rate measured on one problem size
(T=2048); shorter sequences reach a lower rate. On other GPU models advisor holds no measured
rate and says only what the attention takes.
"""

from __future__ import annotations

from advisor.message import Message
from advisor.model import Profile
from advisor.remedies import Kind, Remedy, severity
from advisor.rule import Rule
from advisor.views import ops as ops_view
from advisor.views import peak as peak_view

from ._common import is_attention_logits, is_backward

BACKWARD_FACTOR = 2.5   # a fused backward's matmul FLOPs against its forward's (advisor/load/attention_cost.py)
# Fused attention's rate measured on a GPU model (the device table's row name): what advisor reads over
# the steps of a recorded trace of jax.grad of cuDNN's fused attention.
MEASURED = {
    "NVIDIA H100 SXM": (298e12, "measured on one H100 (fixtures/h100-traces/attention_cudnn, 2026-11-26, JAX 0.11.2: "
                                "jax.grad of causal cuDNN attention, bf16, B=16, T=2048, H=16, D=128; advisor "
                                "reads 298 TFLOP/s over its steps)"),
}
CUDNN_HEAD_DIM = 128            # JAX's cuDNN path: head dims up to 128, a multiple of 8
CUDNN_HEAD_DIM_HOPPER = 256     # ... up to 256 on Hopper (compute capability 9.0) with cuDNN 9.5+

_SPLIT = "{matmul:ms} in {matmuls} matmuls, {other:ms} in the softmax, masks and reductions over the scores"
MESSAGE = Message(      # with the fused kernel's rate measured on this GPU model
    title="attention over materialized scores takes {total:ms} per step ({share:pct} of op time): softmax over {shape} "
          "and its matmuls, not fused",
    bundled="compute attention with a fused kernel: jax.nn.dot_product_attention(q, k, v, is_causal=True, "
            "implementation='cudnn') in place of the einsums and softmax (the bundled Transformer has no setting for "
            "it: a code change)",
    at_source=False,
    fix="{advice}{limits}",
    gain="about {saving:ms} less per step: the unfused attention's {total:ms} measured (" + _SPLIT + ") against about "
         "{fused:ms} for {fused_flops:flop} at {rate:si FLOP/s}, the fused rate {source_of_rate}; a shorter sequence "
         "than 2048 reaches less, so this is an estimate{rematted}",
    cost="a code change and cuDNN's constraints (head dim {head_dim}, {dtype}{causal}: the cuDNN path takes "
         "float16/bfloat16 q, k, v, head dims up to 128 (256 on Hopper with cuDNN 9.5+) in multiples of 8, causal, "
         "padding (sequence lengths), sliding-window or bias/boolean masks, and no dropout on the attention "
         "probabilities); the kernel computes the scores and their softmax in float32 inside (cuDNN's default compute "
         "type) from float16/bfloat16 q, k, v",
)
UNESTIMATED = MESSAGE.but(      # no fused rate measured on this GPU model, or the fused path does not apply as is
    saving=None,
    gain="up to the unfused attention's {total:ms} per step measured (" + _SPLIT + "), less the fused kernel's own "
         "time: {unestimated}",
)


def _square(dims, lengths) -> bool:
    return len(dims) >= 3 and dims[-1] == dims[-2] and dims[-1] in lengths


def attention_rows(rows, lengths: set, prefixes: set) -> tuple[list, list]:
    """(matmuls, others) of the unfused attention over scores of these sequence lengths."""
    matmuls, others = [], []
    for r in rows:
        ins = r.instruction
        md = ins.matmul_dims
        if r.matmul:
            if len(md) == 4 and md[0] > 1 and ((md[1] == md[2] and md[1] in lengths)
                                               or (md[3] in lengths and (md[1] in lengths or md[2] in lengths))):
                matmuls.append(r)
        elif _square(ins.dims, lengths) or (ins.does("reduce") and tuple(ins.dims) in prefixes):
            others.append(r)
    return matmuls, others


def check(profile: Profile, min_share: float = 0.1):
    if profile.backend != "gpu" or "nvidia" not in (profile.device_name or "").lower():
        return
    view = ops_view.of(profile)
    if view is None:
        return
    steps = max(view.steps, 1)
    rows = [r for r in view.rows if r.module == profile.step_module]
    softmax = [r for r in rows if not r.matmul and is_attention_logits(r.instruction.shape)
               and r.instruction.does("exponential")]
    if not softmax:
        return
    lengths = {r.instruction.dims[-1] for r in softmax}
    prefixes = {tuple(r.instruction.dims[:-1]) for r in softmax}
    matmuls, others = attention_rows(rows, lengths, prefixes)
    forward = [r for r in matmuls if not r.remat and not is_backward(r.instruction.op_name)]
    if not forward:
        return
    op_ns = sum(r.time_ns for r in rows) / steps
    matmul_ns = sum(r.time_ns for r in matmuls) / steps
    other_ns = sum(r.time_ns for r in others) / steps
    total = matmul_ns + other_ns
    share = total / op_ns if op_ns else 0.0
    if share < min_share:
        return
    module = profile.modules[profile.step_module]
    causal = any(_square(i.dims, lengths) and i.does("iota") and i.does("compare")
                 for i in module.instructions.ops.values())
    rematted = any(r.remat for r in matmuls)
    fwd_flops = sum(r.flops or 0 for r in forward) / steps * (0.5 if causal else 1.0)
    fused_flops = fwd_flops * (1 + BACKWARD_FACTOR + (1 if rematted else 0))
    qk = max(forward, key=lambda r: r.time_ns).instruction
    head_dim = min(qk.matmul_dims[1:]) if qk.matmul_dims else 0
    # q, k may be upcast for float32 logits (softmax_dtype float32) while the values stay in the compute dtype:
    # the fused kernel takes them in that dtype and keeps its softmax in float32
    dtypes = {r.instruction.matmul_dtype or r.instruction.dtype for r in forward}
    dtype = next((d for d in ("bf16", "f16") if d in dtypes), qk.matmul_dtype or qk.dtype)
    peaks = peak_view.of(profile)
    model = peaks.row.device if peaks.row is not None else ""
    rate, source = MEASURED.get(model, (None, ""))
    hopper = model.startswith("NVIDIA H")
    limits = []
    if dtype not in ("bf16", "f16"):
        limits.append(f"its q, k, v are {dtype}: the cuDNN path takes float16 or bfloat16 only")
    if head_dim % 8 or head_dim > (CUDNN_HEAD_DIM_HOPPER if hopper else CUDNN_HEAD_DIM):
        limits.append(f"head dim {head_dim} is outside what the cuDNN path supports")
    remedy = Remedy(Kind.FUSED_ATTENTION)
    fused_ns = fused_flops / rate * 1e9 if rate and fused_flops else None
    estimated = fused_ns is not None and not limits
    yield RULE.finding(
        profile, message=MESSAGE if estimated else UNESTIMATED, remedy=remedy, impact=share,
        severity=severity(profile, remedy, share, RULE.severity) if estimated else "info",
        source=next((str(r.instruction.source) for r in forward if r.instruction.source), None),
        total=total, share=share, shape=softmax[0].instruction.shape,
        limits="; but " + "; ".join(limits) if limits else "",
        saving=max(total - fused_ns, 0.0) if estimated else None, matmul=matmul_ns, matmuls=len(matmuls),
        other=other_ns,
        fused=fused_ns, fused_flops=fused_flops, rate=rate, source_of_rate=source, head_dim=head_dim, dtype=dtype,
        rematted=("; the attention is rematted, so part of this time is remat's recomputation, which unneeded-remat "
                  "counts too" if rematted else ""),
        causal=", causal mask" if causal else "",
        unestimated=(f"advisor holds no fused rate measured on {model or 'this GPU model'} (only on "
                     f"{', '.join(MEASURED)}); time both" if not limits else
                     "not estimated, as the fused path does not apply as is"),
        evidence={
            "attention_ms_per_step": round(total / 1e6, 3),
            "matmul_ms_per_step": round(matmul_ns / 1e6, 3),
            "softmax_and_masks_ms_per_step": round(other_ns / 1e6, 3),
            "share_of_op_time": round(share, 4),
            "op_time_ms_per_step": round(op_ns / 1e6, 3),
            "sequence_lengths": sorted(lengths),
            "head_dim": head_dim,
            "dtype": dtype,
            "causal": causal,
            "rematted": rematted,
            "forward_matmul_flops_per_step": sum(r.flops or 0 for r in forward) / steps,
            "fused_flops_per_step": fused_flops,
            "fused_flops_per_s": rate,
            "fused_rate_source": source or None,
            "estimated_fused_ms_per_step": round(fused_ns / 1e6, 3) if fused_ns is not None else None,
            "ops": [r.name for r in sorted(matmuls + others, key=lambda r: -r.time_ns)[:10]],
        })


RULE = Rule(
    id="unfused-attention",
    severity="warning",
    backends=("gpu",),
    summary="attention over materialized [batch, heads, q, k] scores takes a material share of a GPU step",
    check=check,
    message=MESSAGE,
    needs=("hlo", "steps"),
    doc=__doc__,
)
