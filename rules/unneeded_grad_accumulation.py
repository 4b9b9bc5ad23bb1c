"""unneeded-grad-accumulation: gradients are accumulated although the whole batch would fit.

## What it does
Finds a loop in the step that runs the backward pass once per minibatch (gradient
accumulation; the loop's trip count is the number of minibatches), or accumulation across
calls with `optax.MultiSteps` (the step's instructions come from `MultiSteps.update`: a
`lax.cond` on a mini-step counter, the update applied every k-th call, and an accumulator the
size of the gradients in the optimizer state), estimates the peak memory of the step without
it (the activations at peak grow with the minibatch size; MultiSteps' accumulator goes), and
compares that with the device's memory capacity.

## Why is this bad?
Accumulation trades speed for memory: N smaller forward/backward passes use the device less
well than one large one, and add N gradient sums. Once remat, bfloat16 and donation have
brought memory down, the accumulation is often no longer needed (the tutorial: 0.91 s ->
0.86 s per step going from 4 minibatches to 1).

## Example
```python
grads = accumulate_gradients(state, batch, rng, num_minibatches=4)
```

## Use instead
```python
grads = accumulate_gradients(state, batch, rng, num_minibatches=1)
```
Check the margin: the estimate is from the buffers at peak, and fragmentation needs headroom.

## Options
- `margin` (default 0.2): leave this share of device memory free.

## Note
Needs the device's memory capacity: GPU traces record it; CPU traces do not, so on the CPU
the rule stays silent unless a capacity is given (`--option unneeded-grad-accumulation.capacity_bytes=...`).
"""

from __future__ import annotations

from collections import Counter
from typing import Optional

from advisor.message import Message
from advisor.model import Profile
from advisor.remedies import Kind, Remedy
from advisor.rule import Rule
from advisor.settings import device_capacity
from advisor.views.activations import activations

from ._common import bundled_config, measured_by

MESSAGE = Message(
    title="gradients are accumulated over {n} minibatches, yet the whole batch should fit: about {peak:mib} of "
          "{capacity:mib}",
    bundled="use fewer minibatches (1 if it fits): one large forward/backward pass instead of {n} small ones",
    saving=None,
    gain="faster steps (no per-minibatch loop); one trace cannot measure how much: {measured_by} measures it",
    cost="about {more:mib} more peak memory",
)
# optax.MultiSteps: accumulated across calls of the step
ACROSS_CALLS = MESSAGE.but(
    title="gradients are accumulated across {n} calls with optax.MultiSteps (an accumulator of about "
          "{accumulator:mib}, the size of the gradients, in the optimizer state), yet the whole batch should fit: "
          "about {peak:mib} of {capacity:mib}",
    bundled=None,
    fix="drop optax.MultiSteps and pass the {n} minibatches as one batch to one call: one forward/backward pass "
        "instead of {n}, and no accumulator ({accumulator:mib} less optimizer state)",
    gain="faster updates (one call per update instead of {n}); one trace cannot measure how much: time both with "
         "advisor.trace",
)


def check(profile: Profile, margin: float = 0.2, capacity_bytes: Optional[int] = None):
    capacity = capacity_bytes or device_capacity(profile)
    memory, module = profile.memory, profile.modules.get(profile.step_module or "")
    if not capacity or memory is None or module is None:
        return
    across_calls = module.grad_accumulation_steps is None and bool(module.multisteps_every)
    if module.grad_accumulation_steps is None and not across_calls:
        return
    config = bundled_config(profile)
    n = (module.multisteps_every if across_calls else module.grad_accumulation_steps
         or (config or {}).get("optimizer", {}).get("num_minibatches", 0))
    if n <= 1:
        return
    act = sum(b.bytes for b in activations(profile))
    accumulator = accumulator_bytes(module) if across_calls else 0
    full_batch_peak = memory.peak_bytes + (n - 1) * act - accumulator
    budget = capacity * (1 - margin)
    if full_batch_peak > budget:
        return
    yield RULE.finding(
        profile, message=ACROSS_CALLS if across_calls else MESSAGE, remedy=Remedy(Kind.FEWER_MINIBATCHES, value=1),
        impact=0.1, source=_multisteps_source(module) if across_calls else None, n=n, accumulator=accumulator,
        peak=full_batch_peak, capacity=capacity, more=full_batch_peak - memory.peak_bytes,
        measured_by=measured_by(profile, "run-workload --verify"),
        evidence={
            "minibatches": n,
            "across_calls": across_calls,
            "accumulator_bytes": accumulator,
            "peak_bytes": memory.peak_bytes,
            "activation_bytes": act,
            "estimated_full_batch_peak_bytes": int(full_batch_peak),
            "device_capacity_bytes": int(capacity),
            "estimated_share_of_capacity": round(full_batch_peak / capacity, 4),
        })


def _multisteps_source(module):
    """The user's line that calls the optimizer's update: where the mini-step `lax.cond` is traced."""
    return next((str(i.source) for i in module.instructions.values() if "cond/" in i.op_name and i.source), None)


def accumulator_bytes(module) -> int:
    """optax.MultiSteps keeps a gradient-sized accumulator beside the parameters and the inner
    optimizer's state: the updated state holds each parameter shape once per copy, and one copy
    is the accumulator (the total of the arrays shaped once per copy, divided by the copies)."""
    arrays = {n: d for n, d in module.parameter_dims.items() if n in module.updated_parameters and d}
    if not arrays:
        return 0
    copies = min(Counter(arrays.values()).values())
    return sum(module.parameter_bytes.get(n, 0) for n in arrays) // max(copies, 1)


RULE = Rule(
    id="unneeded-grad-accumulation",
    severity="warning",
    backends=("cpu", "gpu", "tpu"),
    summary="gradient accumulation while the full batch would fit in device memory",
    check=check,
    message=MESSAGE,
    needs=("hlo", "buffers", "capacity"),
    unmet_notes=(("capacity", "device memory capacity unknown (the trace does not record it): "
                              "unneeded-grad-accumulation was skipped; pass --device-memory to check it"),),
    doc=__doc__,
)
