"""launch-bound: many tiny kernels, each too short to amortize its launch.

## What it does
Counts, on each GPU, the kernels shorter than 10 µs and the time they take, and the device's idle
gaps under 20 µs between kernels inside the steps (the idle view: each one a wait for the next
launch). It fires when the step runs at least `min_kernels` of them per step and they take at least
`min_share` of kernel time, or the gaps take at least `min_gap_share` of the step: the device then
spends its time starting kernels rather than computing in them. Such gaps are not host-bound
time: the host is busy launching, not waiting on a value.

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
loop, fewer and larger jitted calls (jit the whole step). On a GPU, keep XLA's command buffers
on (the default): a jitted step's kernels then run as a few CUDA graph launches instead of one
launch each; with `XLA_FLAGS=--xla_gpu_enable_command_buffer=` the seed Transformer's step
launches about 5,000 kernels one by one. That advice is given only where a program launched 5
kernels or more (XLA makes no graph of fewer): a Python loop over a small jitted call is told
to loop under jit instead.

## Options
- `min_kernels` (default 200): fire from this many kernels under 10 µs per step.
- `min_share` (default 0.3): fire when those kernels take at least this share of kernel time,
- `min_gap_share` (default 0.1): or when gaps under 20 µs between kernels take this share of the step.
"""

from __future__ import annotations

from advisor.message import Message
from advisor.model import Profile
from advisor.rule import Rule
from advisor.units import ms, pct
from advisor.views import idle as idle_view
from advisor.views import kernels

MESSAGE = Message(
    title="{device}: {count:,.0f} kernels under {small_us:g} µs (mean {mean_us:,.1f} µs) {steps} take {share:pct} of "
          "kernel time ({small:ms}){waits}: launch-bound{one_by_one}",
    fix="give each kernel more work: a larger batch, lax.scan or lax.fori_loop instead of a Python loop over jitted "
        "calls, and fewer, larger jitted functions (jit the whole step)",
    gain="up to {gaps:ms} {each}: the measured gaps between launches, which fewer launches remove; more from fewer, "
         "larger kernels (the {small:ms} {each} of kernels under {small_us:g} µs is mostly their fixed cost)",
    cost="a larger batch needs more device memory and may change convergence; a scan compiles its body once and runs "
         "it sequentially; CUDA graphs are recorded once per program, at its first run",
)
NO_GAPS = MESSAGE.but(gain="up to {small:ms} {each}: the measured time of the kernels under {small_us:g} µs, most of "
                           "it their fixed cost")
# CUDA graphs only help a program that launches several kernels per run; a Python loop over a
# one-kernel jitted call gains nothing from them (XLA's minimum graph size is 5 thunks)
GRAPHS = "let XLA launch the step's kernels as CUDA graphs (command buffers, on by default: XLA_FLAGS must not set " \
         "--xla_gpu_enable_command_buffer= empty), which replaces thousands of launches by a few; and "


def check(profile: Profile, min_kernels: int = 200, min_share: float = 0.3, min_gap_share: float = 0.1):
    per = max(len(profile.steps), 1)
    view = idle_view.of(profile)
    gaps = view.launch_ns / len(view.steps) if view is not None and view.steps else 0.0
    gap_share = view.launch_share if view is not None else 0.0
    small_of = kernels.of(profile)
    for d in profile.active_devices:
        if not d.kernel_count or not d.kernel_ns:
            continue
        small_kernels = small_of.of_device(d.name)
        count = small_kernels.count / per
        share = small_kernels.ns / d.kernel_ns
        if count < min_kernels or (share < min_share and gap_share < min_gap_share):
            continue
        mean_us = small_kernels.ns / max(small_kernels.count, 1) / 1e3
        small = small_kernels.ns / per
        one_by_one = not d.graph_launches
        most = _kernels_per_program(profile, d.name)
        message = MESSAGE if gaps else NO_GAPS
        if one_by_one and profile.backend == "gpu" and most >= _MIN_GRAPH:
            message = message.but(fix=GRAPHS + message.fix)
        yield RULE.finding(
            profile, message=message, device=d.name, count=count, small_us=small_of.threshold_ns / 1e3, mean_us=mean_us,
            steps="per step" if profile.steps else "over the traced window, which has no steps,",
            each="per step" if profile.steps else "over the traced window", share=share, small=small, gaps=gaps,
            saving=gaps or small, impact=max(share, gap_share),
            waits=(f"; the device waits {pct(gap_share)} of the step ({ms(gaps)}) in gaps under "
                   f"{idle_view.LAUNCH_GAP_NS / 1e3:g} µs between them" if gap_share >= min_gap_share else ""),
            one_by_one=", kernels launched one by one" if one_by_one and profile.backend == "gpu" else "",
            evidence={
                "device": d.name,
                "small_kernels_per_step": round(count, 1),
                "small_kernel_share_of_kernel_time": round(share, 4),
                "small_kernel_time_per_step_ms": round(small / 1e6, 3),
                "mean_small_kernel_us": round(mean_us, 2),
                "kernels_per_step": round(d.kernel_count / per, 1),
                "launch_gap_share_of_step": round(gap_share, 4),
                "launch_gap_time_per_step_ms": round(gaps / 1e6, 3),
                "command_buffer_launches": d.graph_launches,
                "most_kernels_per_program": most,
                # launches onto an idle device: the launch's own overhead (queued ones measure the host's lead)
                "launch_overhead_median_us": round(d.launch_overhead_median_ns / 1e3, 2)
                if d.launch_overhead_median_ns is not None else None,
            })


_MIN_GRAPH = 5      # XLA's --xla_gpu_graph_min_graph_size default: fewer thunks run without a graph


def _kernels_per_program(profile: Profile, device: str) -> int:
    """The most ops (kernel-launching instructions) any one program ran on this device."""
    per: dict[str, set] = {}
    for op in profile.ops:
        if op.device == device:
            per.setdefault(op.module, set()).add(op.name)
    return max((len(names) for names in per.values()), default=0)


RULE = Rule(
    id="launch-bound",
    severity="warning",
    backends=("gpu", "tpu"),
    summary="many kernels under 10 µs per step: the device spends its time launching them",
    check=check,
    message=MESSAGE,
    needs=("kernels",),
    doc=__doc__,
)
