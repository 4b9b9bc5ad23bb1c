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
Donated arguments are invalid after the call: do not reuse the old `state`. On your own
code the advice names your step's arguments that hold the state (`donate_argnames=("params",
"opt_state")`), read from the names JAX gives the program's parameters; where the trace does not
name them it says which to donate in words.

Donation is free at run time, so it is reported whenever it frees a material number of bytes:
a `warning` when that is at least 10% of peak memory and 16 MiB, `info` below.

## Options
- `min_bytes` (default 4 MiB): fire when the donatable bytes are at least this many.
"""

from __future__ import annotations

import re

from advisor.message import Message
from advisor.model import Profile
from advisor.remedies import Kind, Remedy, config_for, severity
from advisor.rule import Rule

MESSAGE = Message(
    title="no input is donated: {saving:mib} of state ({share:pct} of peak memory) is held twice",
    bundled="donate the train state (and metrics) to the jitted step: jax.jit(step, donate_argnames=(\"state\", "
            "\"metrics\"))",
    metric="peak_memory",
    gain="up to {saving:mib} less device memory: the old state is reused for the new",
    cost="none at run time; the donated arguments cannot be used after the call",
)
# the user's code, where the trace names the step's arguments that hold the state
NAMED = MESSAGE.but(fix="donate the arguments that hold the train state, {names} (the step returns their arrays "
                        "updated): `jax.jit(train_step, donate_argnames=({listed}))` (NNX: `nnx.jit`), and do not "
                        "reuse them after the call")


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
    names = argument_names(module, state)
    biggest = sorted(state.items(), key=lambda kv: -kv[1])[:5]
    yield RULE.finding(
        profile, message=NAMED if names and not config_for(profile, remedy) else MESSAGE, remedy=remedy,
        severity=severity(profile, remedy, share, RULE.severity, donatable), impact=share, saving=donatable,
        share=share, names=", ".join(names),
        listed=", ".join(f'"{n}"' for n in names) + ("," if len(names) == 1 else ""),
        evidence={
            "donatable_bytes": donatable,
            "updated_inputs": len(state),
            "input_bytes": inputs,
            "output_bytes": module.output_bytes,
            "peak_bytes": memory.peak_bytes,
            "share_of_peak": round(share, 4),
            "aliased_inputs": 0,
            "largest_inputs": [{"parameter": n, "bytes": b} for n, b in biggest],
            "state_arguments": names,
            "module": module.key,
        })


def argument_names(module, state: dict[int, int]) -> list[str]:
    """The step's arguments that hold the updated inputs, by the names JAX gives its entry parameters
    (`opt_state[0].mu[0]` is argument `opt_state`), in the step's order; [] where any of them is
    unnamed or named only by position (`args[0]`): then the advice says it in words, never a guess."""
    names = []
    for number in sorted(state):
        m = _ARGUMENT.match(module.parameter_names.get(number, ""))
        if not m or m.group(1) in ("args", "kwargs"):
            return []
        names.append(m.group(1))
    return list(dict.fromkeys(names))


_ARGUMENT = re.compile(r"([A-Za-z_]\w*)(?=[\[.]|$)")


RULE = Rule(
    id="missing-buffer-donation",
    severity="warning",
    backends=("cpu", "gpu", "tpu"),
    summary="the jitted step's large inputs are not aliased to its outputs (no donation)",
    check=check,
    message=MESSAGE,
    needs=("hlo", "buffers"),
    doc=__doc__,
)
