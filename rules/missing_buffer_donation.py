"""missing-buffer-donation: the step's state is held twice because it is not donated.

## What it does
Reads the jitted step's input/output aliasing from its optimized HLO. When no input is
aliased to an output while the inputs the step returns updated (parameters, optimizer
state: an output computed directly from the input of the same shape) are a material share
of peak memory, it reports the memory that donation frees. A function that returns
gradients, not updated inputs, has nothing to donate and is left alone.

## Why is this bad?
A train step takes the state and returns a new state of the same shapes. Without donation
XLA must allocate the outputs beside the inputs, and the caller's old state stays alive
until the call returns: parameters and optimizer state are held twice at the peak.

## Example
```python
train_step = jax.jit(train_step)
state, metrics = train_step(state, metrics, batch)
```

## Use instead
```python
train_step = jax.jit(train_step, donate_argnames=("state", "metrics"))
```
Donated arguments are invalid after the call: do not reuse the old `state`.

Donation is free at run time, so it is reported whenever it frees a material number of bytes:
a `warning` when that is at least 10% of peak memory and 16 MiB, `info` below.

## Options
- `min_bytes` (default 4 MiB): fire when the donatable bytes are at least this many.
"""

from __future__ import annotations

from advisor.findings import Expected, Finding, Recommendation
from advisor.model import Profile
from advisor.rule import Rule
from advisor.units import mib, pct

from advisor.remedies import Kind, Remedy, advice, severity


def check(profile: Profile, min_bytes: int = 4 * 1024 * 1024):
    memory, module = profile.memory, profile.modules.get(profile.step_module or "")
    if memory is None or module is None or module.aliased_parameters or memory.peak_bytes <= 0:
        return
    inputs = sum(module.parameter_bytes.values())
    state = {n: b for n, b in module.parameter_bytes.items() if n in module.updated_parameters}
    donatable = sum(state.values())
    share = donatable / memory.peak_bytes
    if donatable < min_bytes:
        return
    remedy = Remedy(Kind.DONATE, "state")
    text, config = advice(profile, remedy, "donate the train state (and metrics) to the jitted step: "
                                           "jax.jit(step, donate_argnames=(\"state\", \"metrics\"))")
    biggest = sorted(state.items(), key=lambda kv: -kv[1])[:5]
    yield Finding(
        rule=RULE.id,
        severity=severity(profile, remedy, share, RULE.severity, donatable),
        title=f"no input is donated: {mib(donatable)} of state ({pct(share)} of peak memory) is held twice",
        evidence={
            "donatable_bytes": donatable,
            "updated_inputs": len(state),
            "input_bytes": inputs,
            "output_bytes": module.output_bytes,
            "peak_bytes": memory.peak_bytes,
            "share_of_peak": round(share, 4),
            "aliased_inputs": 0,
            "largest_inputs": [{"parameter": n, "bytes": b} for n, b in biggest],
            "module": module.key,
        },
        recommendation=Recommendation(
            text=text,
            config=config,
            remedy=remedy,
            expected=Expected("peak_memory", donatable, "bytes",
                              f"up to {mib(donatable)} less device memory: the old state is reused for the new"),
            cost="none at run time; the donated arguments cannot be used after the call",
        ),
        impact=share,
    )


RULE = Rule(
    id="missing-buffer-donation",
    severity="warning",
    backends=("cpu", "gpu", "tpu"),
    summary="the jitted step's large inputs are not aliased to its outputs (no donation)",
    check=check,
    needs=("hlo", "buffers"),
    doc=__doc__,
)
