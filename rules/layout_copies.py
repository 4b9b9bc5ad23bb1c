"""layout-copies: transposes and layout copies take a material share of device time.

## What it does
Sums the device time of the ops that only move data into another layout: transposes, copies
whose result layout differs from their operand's (the HLO's layouts say), and fusions made of
nothing else. Copies that keep the layout (loop state, buffers) are not counted. These are memory-bound: they
read and write every byte and compute nothing. It fires when they take at least `min_share` of op
time, and names the longest with the bandwidth they reach against the device's peak.

## Why is this bad?
Every byte a layout change moves costs HBM bandwidth and a kernel launch, and buys no compute.
They appear when consecutive ops want different layouts: a convolution in NCHW where cuDNN
wants NHWC, an einsum whose output dimension order is not the next einsum's input order, a
reshape across non-contiguous dimensions. A convolution trace spending half its busy time in
transposes is not rare.

## Example
```python
x = jnp.transpose(x, (0, 3, 1, 2))                       # NHWC -> NCHW for a conv in NCHW
y = jax.lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NCHW", "OIHW", "NCHW"))
```

## Use instead
```python
y = jax.lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
```
Keep one layout end to end (NHWC for convolutions on GPUs and TPUs, Flax's default), and write
einsums so each one's output order is the next one's input order.

## Options
- `min_share` (default 0.15): fire when layout ops take at least this share of device op time.
"""

from __future__ import annotations

from advisor.message import Message
from advisor.model import Profile
from advisor.rule import Rule
from advisor.units import pct, si
from advisor.views import ops as ops_view
from advisor.views import peak as peak_view

MESSAGE = Message(
    title="layout transposes and copies take {share:pct} of device op time ({saving:ms} per step, {count} ops){at}; "
          "the longest: {top}",
    fix="keep one layout end to end: NHWC for convolutions (dimension_numbers=(\"NHWC\", \"HWIO\", \"NHWC\"), Flax's "
        "default), einsums whose output order is the next op's input order, and no jnp.transpose or swapaxes between "
        "ops that could take the data as it is",
    gain="up to {saving:ms} per step, the measured time of the layout ops",
    cost="code changes where layouts are chosen; none at run time",
)


def check(profile: Profile, min_share: float = 0.15):
    ops = ops_view.of(profile)
    if ops is None:
        return
    per = max(ops.steps, 1)
    total = sum(r.time_ns for r in ops.rows)
    layout = [r for r in ops.rows if r.instruction.changes_layout]
    time = sum(r.time_ns for r in layout)
    if not total or time / total < min_share:
        return
    share = time / total
    peak, _ = peak_view.of(profile).step       # the efficiency section's: the user's, where given
    rate = sum(r.bytes for r in layout) / (time / 1e9)
    at = f", moving {si(rate, 'B/s')}" + (f" ({pct(rate / peak.bytes_per_s)} of {peak.device}'s "
                                         f"{si(peak.bytes_per_s, 'B/s')}, {peak.source})"
                                             if peak and peak.bytes_per_s and rate <= peak.bytes_per_s else "")
    top = layout[0]
    yield RULE.finding(
        profile, share=share, saving=time / per, count=len(layout), at=at, top=top.name, impact=share,
        source=str(top.instruction.source) if top.instruction.source else None,
        evidence={
            "layout_share_of_op_time": round(share, 4),
            "layout_time_per_step_ms": round(time / per / 1e6, 3),
            "bytes_per_step": int(sum(r.bytes for r in layout) / per),
            "ops": [{"op": r.name, "module": r.module, "opcode": r.instruction.opcode, "shape": r.instruction.shape,
                     "time_per_step_ms": round(r.time_ns / per / 1e6, 3)} for r in layout[:8]],
        })


RULE = Rule(
    id="layout-copies",
    severity="warning",
    backends=("gpu", "tpu"),
    summary="transposes and layout copies (memory-bound, no compute) take a material share of device time",
    check=check,
    message=MESSAGE,
    needs=("hlo",),
    doc=__doc__,
)
