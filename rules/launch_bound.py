"""launch-bound: many tiny kernels, each too short to amortize its launch.

## What it does
Counts, on each GPU, the kernels shorter than 10 µs and the time they take. It fires when the
step runs at least `min_kernels` of them per step and they take at least `min_share` of kernel
time: the device then spends its time starting kernels rather than computing in them.

## Why is this bad?
Every kernel has a fixed cost of a few microseconds (the launch, filling the GPU, draining it)
whatever its size. Thousands of tiny kernels per step (a Python loop over small jitted calls,
a model whose tensors are too small, one kernel per element of a loop) leave the device mostly
starting and stopping; the host may not even keep up with launching them.

## Example
```python
for i in range(1000):
    x = small_step(x)          # a jitted call per iteration: its kernels are tiny
```

## Use instead
```python
x = jax.lax.fori_loop(0, 1000, lambda i, x: small_step(x), x)   # one program for the loop
```
Batch more work into each kernel: a larger batch, `lax.scan`/`fori_loop` instead of a Python
loop, fewer and larger jitted calls (jit the whole step).

## Options
- `min_kernels` (default 200): fire from this many kernels under 10 µs per step.
- `min_share` (default 0.3): fire when those kernels take at least this share of kernel time.
"""

from __future__ import annotations

from advisor.findings import Expected, Finding, Recommendation
from advisor.model import SMALL_KERNEL_NS, Profile
from advisor.rule import Rule
from advisor.units import ms, pct


def check(profile: Profile, min_kernels: int = 200, min_share: float = 0.3):
    per = max(len(profile.steps), 1)
    for d in profile.active_devices:
        if not d.kernel_count or not d.kernel_ns:
            continue
        count = d.small_kernel_count / per
        share = d.small_kernel_ns / d.kernel_ns
        if count < min_kernels or share < min_share:
            continue
        mean_us = d.small_kernel_ns / max(d.small_kernel_count, 1) / 1e3
        small = d.small_kernel_ns / per
        steps = "per step" if profile.steps else "over the traced window, which has no steps,"
        yield Finding(
            rule=RULE.id,
            severity=RULE.severity,
            title=f"{d.name}: {count:,.0f} kernels under {SMALL_KERNEL_NS / 1e3:g} µs (mean {mean_us:.1f} µs) {steps} "
                  f"take {pct(share)} of kernel time ({ms(small)}): launch-bound",
            evidence={
                "device": d.name,
                "small_kernels_per_step": round(count, 1),
                "small_kernel_share_of_kernel_time": round(share, 4),
                "small_kernel_time_per_step_ms": round(small / 1e6, 3),
                "mean_small_kernel_us": round(mean_us, 2),
                "kernels_per_step": round(d.kernel_count / per, 1),
                "launch_delay_median_us": round(d.launch_delay_median_ns / 1e3, 2)
                if d.launch_delay_median_ns is not None else None,
            },
            recommendation=Recommendation(
                text="give each kernel more work: a larger batch, lax.scan or lax.fori_loop instead of a Python "
                     "loop over jitted calls, and fewer, larger jitted functions (jit the whole step)",
                expected=Expected("step_time", round(small / 1e6, 3), "ms",
                                  f"up to {ms(small)} {'per step' if profile.steps else 'over the traced window'}, "
                                  "the measured time of the kernels under "
                                  f"{SMALL_KERNEL_NS / 1e3:g} µs, most of it their fixed cost"),
                cost="a larger batch needs more device memory and may change convergence; a scan compiles "
                     "its body once and runs it sequentially",
            ),
            impact=share,
        )


RULE = Rule(
    id="launch-bound",
    severity="warning",
    backends=("gpu", "tpu"),
    summary="many kernels under 10 µs per step: the device spends its time launching them",
    check=check,
    needs=("kernels",),
    doc=__doc__,
)
