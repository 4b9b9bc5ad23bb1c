"""host-bound: the device waits on the host inside the steps.

## What it does
Reads how much of each profiled step the device spends idle (the idle view: step time less
the time the device had work in flight: program executions on the CPU backend, kernels and
copies on a GPU; the efficiency verdict reads the same figure). When the idle share is large
it looks at what the host did in that time: waiting on device values (`float(loss)`,
`np.asarray`, `block_until_ready`, printing), copying data to the device, compiling, or plain
Python dispatch and data preparation (NumPy work between steps).

## Why is this bad?
JAX dispatches asynchronously: the host should queue step N+1 while the device runs step
N. Anything that makes the host wait for a result every step (printing or logging a loss,
`.item()`), or that keeps it busy preparing data, leaves the device idle for that time.

## Example
```python
for step in range(steps):
    state, loss = train_step(state, batch)
    print(float(loss))                 # waits for the device every step
```

## Use instead
```python
    if step % 100 == 0:
        print(float(loss))             # or accumulate metrics on device
```
Prepare and transfer the next batch while the current step runs (prefetch), and jit a
larger piece of work when the steps are tiny.

A first step that includes compilation (the one-time first compile, when the trace starts
at the first call) is left out of the measurement; the run's notes say so. The idle time is
blamed on "sync" only when the host waits for a device value inside the loop (in most steps),
not for one wait at the end. On a GPU, the gaps under 20 µs between kernels launched one by one
are not counted: the device waits there for the next launch, not for the host's Python, and
`launch-bound` reports them.

## Options
- `min_idle_share` (default 0.2): fire when the device idles at least this share of step time.
"""

from __future__ import annotations

from advisor.message import Message
from advisor.model import Profile, overlap_ns
from advisor.rule import Rule
from advisor.views import idle as idle_view

from ._common import merge

ADVICE = {
    "sync": ("the host waits for device values every step (converting, printing or blocking on results): "
             "fetch metrics every N steps, or accumulate them on device"),
    "transfer": "the host copies input data to the device inside the step: prefetch the next batch to the "
                "device while the current step runs, or keep the data on device",
    "compile": "the host compiles inside the steps: see the recompilation finding",
    "dispatch": "the host spends the gap in Python dispatch or data preparation: jit a larger piece of work "
                "(the whole step, or several steps with lax.scan) and prepare batches ahead of time",
}
COST = {      # what each fix gives up, by cause
    "sync": "metrics reach the host every N steps, not every step",
    "transfer": "prefetching holds one more batch in device memory",
    "compile": "see the recompilation finding: padding computes on filler elements, bucketing compiles once per bucket",
    "dispatch": "a larger jitted region compiles for longer; batches prepared ahead hold more host memory",
}
MESSAGE = Message(
    title="the device is idle {share:pct} of step time ({saving:ms} per step on average): host-bound, mostly {cause}",
    fix=ADVICE["dispatch"],
    gain="up to {saving:ms} per step, the measured device idle time",
    cost=COST["dispatch"],
)
MESSAGES = {cause: MESSAGE.but(fix=ADVICE[cause], cost=COST[cause]) for cause in ADVICE}   # by likely cause


def _in(spans, steps) -> float:
    return sum(overlap_ns(spans, s.start_ns, s.end_ns) for s in steps)


def check(profile: Profile, min_idle_share: float = idle_view.MIN_SHARE):
    view = idle_view.of(profile)
    if view is None or view.host_share < min_idle_share:
        return    # gaps between kernels launched one by one are launch latency: launch-bound says so
    steps, total, idle, share = view.steps, view.step_ns, view.idle_ns - view.launch_ns, view.host_share
    by_cause = {}
    tool = [(e.start_ns, e.start_ns + e.duration_ns) for e in profile.host_events if e.category == "tool"]
    for cause in ("sync", "transfer", "compile"):
        events = [e for e in profile.host_events if e.category == cause
                  and not any(a <= e.start_ns < b for a, b in tool)]   # advisor.trace's own waits aside
        if cause == "sync":   # a wait inside the loop: in most steps, not one wait at the end
            waited = [s for s in steps if any(e.start_ns < s.end_ns and e.start_ns + e.duration_ns > s.start_ns
                                              for e in events)]
            if len(waited) < max(1, len(steps) // 2):
                events = []
        spans = [(e.start_ns, e.start_ns + e.duration_ns) for e in events]
        if cause == "transfer":   # device copies the compute waits for (GPU memcpy engines)
            spans += [(t.start_ns, t.start_ns + t.duration_ns) for t in profile.transfers
                      if t.kind in ("H2D", "D2H") and profile.backend != "cpu"]
        by_cause[cause] = _in(merge(spans), steps)
    cause = max(by_cause, key=by_cause.get)
    if by_cause[cause] < 0.05 * idle:
        cause = "dispatch"
    per_step_idle = idle / len(steps)
    yield RULE.finding(
        profile, message=MESSAGES[cause], share=share, saving=per_step_idle, cause=cause, impact=share,
        evidence={
            "idle_share": round(share, 4),
            "idle_per_step_ms": round(per_step_idle / 1e6, 3),
            "step_time_total_ms": round(total / 1e6, 3),
            "host_time_in_steps_ms": {k: round(v / 1e6, 3) for k, v in by_cause.items()},
            "likely_cause": cause,
            "steps_measured": len(steps),
        })


def notes(profile: Profile) -> list[str]:
    if idle_view.warm_up_step(profile) is None:
        return []
    return ["the first profiled step includes compilation (a warm-up): host-bound leaves it out of the "
            "idle-time measurement"]


RULE = Rule(
    id="host-bound",
    severity="warning",
    backends=("cpu", "gpu", "tpu"),
    summary="the device sits idle inside steps waiting on the host (sync, transfers, dispatch)",
    check=check,
    message=MESSAGE,
    needs=("steps",),
    binds=("min_idle_share",),
    doc=__doc__,
    notes=notes,
)
