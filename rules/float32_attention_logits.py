"""float32-attention-logits: float32 attention scores are a large share of peak memory.

## What it does
Finds buffers live at the memory peak shaped like attention scores or probabilities,
`[..., heads, q, k]` with q == k, stored in float32 by a program that otherwise computes
in bfloat16, and their share of peak memory.

## Why is this bad?
The scores grow with the square of the sequence length and are saved per layer for the
backward pass. Keeping them float32 for softmax stability doubles that memory (the
tutorial: `f32[12,16,8,512,512]`, 1.5 GB, the largest buffer left after bfloat16).

## Example
```python
weights = jnp.einsum("...qhd,...khd->...hqk", q.astype(jnp.float32), k.astype(jnp.float32))
weights = nn.softmax(weights)
```

## Use instead
A fused attention that never materializes the scores: `jax.nn.dot_product_attention(q, k, v,
implementation="cudnn")` on GPUs (flash attention); or compute the logits in bfloat16
(`softmax_dtype=bfloat16`), accepting less precise softmax for long sequences.

## Options
- `min_share` (default 0.1): fire when such buffers are at least this share of peak memory.

## Note
GPU and TPU only: XLA:CPU upcasts bfloat16 to float32, so a CPU trace cannot show whether
the program chose float32 logits.
"""

from __future__ import annotations

from advisor.message import Message
from advisor.model import Profile
from advisor.remedies import Kind, Remedy, severity
from advisor.rule import Rule
from advisor.views.activations import activations, requests_bfloat16
from advisor.views.layers import source_of

from ._common import dtype, is_attention_logits

MESSAGE = Message(
    title="float32 attention logits are {share:pct} of peak memory ({total:mib}), largest {largest}",
    bundled="use a fused attention (jax.nn.dot_product_attention with implementation='cudnn' on GPU) that does not "
            "store the scores, or compute the logits in bfloat16",
    buys=True,
    metric="peak_memory",
    gain="{saving:mib} less peak memory with bfloat16 logits; up to {total:mib} with a fused attention",
    cost="bfloat16 logits: a less precise softmax (risk grows with sequence length); fused attention: a dependency on "
         "the cuDNN implementation and its supported shapes",
)


def check(profile: Profile, min_share: float = 0.1):
    memory = profile.memory
    if memory is None or memory.peak_bytes <= 0 or not requests_bfloat16(profile):
        return
    logits = [b for b in activations(profile) if dtype(b.shape) == "f32" and is_attention_logits(b.shape)]
    total = sum(b.bytes for b in logits)
    share = total / memory.peak_bytes
    if share < min_share:
        return
    largest = sorted(logits, key=lambda b: -b.bytes)[:5]
    remedy = Remedy(Kind.BFLOAT16, "attention_logits")
    yield RULE.finding(
        profile, remedy=remedy, severity=severity(profile, remedy, share, RULE.severity), impact=share,
        source=source_of(profile, largest), share=share, total=total, saving=total // 2, largest=largest[0].shape,
        evidence={
            "logits_bytes": total,
            "peak_bytes": memory.peak_bytes,
            "share_of_peak": round(share, 4),
            "largest": [{"shape": b.shape, "bytes": b.bytes} for b in largest],
        })


RULE = Rule(
    id="float32-attention-logits",
    severity="warning",
    backends=("gpu", "tpu"),
    summary="float32 attention score buffers [.., heads, q, k] are a large share of peak memory",
    check=check,
    message=MESSAGE,
    needs=("buffers",),
    doc=__doc__,
)
