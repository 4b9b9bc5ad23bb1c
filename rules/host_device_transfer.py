"""host-device-transfer: large host-to-device (or device-to-host) copies every step.

## What it does
Finds the copies between host and device inside the profiled steps: memcpy events on the
GPU's streams (with their sizes from CUPTI's `memcpy_details`), or the PjRt client's
`H2D Dispatch` on the CPU backend (where the trace records no size). It fires when the
steps copy (more than half of them: a recording can miss one step's copy), and the copies are
large or take a material share of step time. Copies are matched to steps by count and size,
not by each step's window: with asynchronous dispatch the host runs ahead and step i's copy
often lands in an earlier step's window.

## Why is this bad?
A NumPy batch, or any host value passed to a jitted step, is copied to the device on every
call; so is every value fetched back. Over PCIe (about 10-25 GB/s) a large batch costs
milliseconds in the critical path when the copy is synchronous with the step. On the CPU
backend the "device" shares host memory, so the copy is a memcpy and matters much less.

## Example
```python
for x in numpy_batches:
    state = train_step(state, x)      # x is copied host -> device inside the step
```

## Use instead
Put the next batch on the device while the current step runs (`jax.device_put` ahead of
time, or `flax.jax_utils.prefetch_to_device`), keep data that does not change on the
device, and fetch results back only when needed.

## Options
- `min_share` (default 0.05): fire when the copies take at least this share of step time,
- `min_bytes_per_step` (default 16 MiB): or move at least this much per step (GPU only).
"""

from __future__ import annotations

from advisor.message import Message
from advisor.model import Profile
from advisor.rule import Rule
from advisor.units import mib
from advisor.views.step_time import steps_total_ns

MESSAGE = Message(
    title="{kinds} copies {when} take {share:pct} of step time ({saving:ms} per step{size})",
    fix="move the next batch to the device while the current step runs (jax.device_put ahead of time or "
        "flax.jax_utils.prefetch_to_device), keep constant data on the device, fetch results back rarely",
    gain="up to {saving:ms} per step, the measured copy time",
    cost="one more batch held in device memory while prefetching",
)
# on the CPU backend the copy is a host memcpy: an info finding, and a small gain
ON_CPU = MESSAGE.but(fix=MESSAGE.fix + "; on the CPU backend the copy is a host memcpy, so expect a small gain")


def check(profile: Profile, min_share: float = 0.05, min_bytes_per_step: int = 16 * 1024 * 1024):
    steps = profile.steps
    total = steps_total_ns(profile)
    if not steps or total <= 0:
        return
    copies = [t for t in profile.transfers if t.kind in ("H2D", "D2H")]
    in_steps = recurring([t for t in copies if steps[0].start_ns <= t.start_ns < steps[-1].end_ns], len(steps))
    if not in_steps:
        return
    time_ns = sum(t.duration_ns for t in in_steps)
    sized = [t.bytes for t in in_steps if t.bytes is not None]
    bytes_per_step = sum(sized) / len(steps) if sized else None
    share = time_ns / total
    big = bytes_per_step is not None and bytes_per_step >= min_bytes_per_step
    if share < min_share and not big:
        return
    kinds = sorted({t.kind for t in in_steps})
    cpu = profile.backend == "cpu"
    yield RULE.finding(
        profile, message=ON_CPU if cpu else MESSAGE, severity="info" if cpu else None, impact=share,
        kinds="/".join(kinds), share=share, saving=time_ns / len(steps),
        when=("every step" if len(in_steps) >= len(steps)
              else f"in most steps ({len(in_steps)} copies in {len(steps)} steps)"),
        size=f", {mib(bytes_per_step)} per step" if bytes_per_step is not None else "; the CPU trace records no sizes",
        evidence={
            "copies_per_step": round(len(in_steps) / len(steps), 2),
            "copy_time_per_step_ms": round(time_ns / len(steps) / 1e6, 3),
            "share_of_step_time": round(share, 4),
            "bytes_per_step": int(bytes_per_step) if bytes_per_step is not None else None,
            "kinds": kinds,
        })


def recurring(copies: list, steps: int) -> list:
    """The copies that recur in most steps, matched by count and size rather than by step window:
    with asynchronous dispatch the host runs ahead, so step i's copy often lands in an earlier
    step's window. Copies of a size seen in more than half the steps (all of them where the trace
    records no sizes, as on CPU) count: a recording can lack one step's copy (a plain NumPy batch
    per step recorded 13 ms copies in 3 of its 4 steps, and none was reported), while a one-off
    copy (the initial parameters) stays out. None if fewer copies than that."""
    most = steps // 2 + 1
    by_size: dict = {}
    for t in copies:
        by_size.setdefault(t.bytes, []).append(t)
    out = [t for group in by_size.values() if len(group) >= most for t in group]
    return out if len(out) >= most else []


RULE = Rule(
    id="host-device-transfer",
    severity="warning",
    backends=("cpu", "gpu", "tpu"),
    summary="large host-to-device or device-to-host copies every step",
    check=check,
    message=MESSAGE,
    needs=("steps",),
    doc=__doc__,
)
