"""recompilation: XLA compiles inside the profiled steps.

## What it does
Counts the compilations (`pxla.py compile` on the Python thread, or the PjRt client's
`Compile` when the Python tracer is off) that overlap the profiled steps, adds up their
time, and names the functions the trace holds more than one program for: the same function
compiled again.

## Why is this bad?
A jitted function is compiled once per distinct input signature: shapes, dtypes, and the
values of static arguments. A batch whose length changes, or a Python scalar passed where
an array was expected, compiles the step again, often taking longer than the step itself,
every time.

## Example
```python
for batch in loader:                     # the last batch is shorter
    state, loss = train_step(state, batch)
```

## Use instead
Give every step the same shapes: pad or bucket variable lengths, drop the ragged last
batch (`drop_remainder=True`), pass flags that change the program as
`static_argnames` with few distinct values, and arrays (not Python numbers) for values
that change every step.

## Options
- `min_compiles` (default 2): fire at this many compilations inside the steps, or at one
  when a function has more than one compiled program in the trace; either way only when
  compiling takes at least 1% of step time.
"""

from __future__ import annotations

import collections

from advisor.findings import Expected, Finding, Recommendation
from advisor.model import Profile
from advisor.rule import Rule
from advisor.units import ms, pct

from ._common import per_step, steps_total_ns


def check(profile: Profile, min_compiles: int = 2):
    events = [e for e in profile.host_events
              if e.category == "compile" and profile.in_steps(e.start_ns, e.start_ns + e.duration_ns)]
    python_side = [e for e in events if e.name.startswith("$")]
    events = python_side or events   # one Python-side compile wraps each PjRt compile
    programs = collections.defaultdict(set)
    for module in profile.modules.values():
        programs[module.name].add(module.program_id)
    repeated = {name: sorted(ids) for name, ids in programs.items() if len(ids) > 1}
    total_ns = sum(e.duration_ns for e in events)
    steps_ns = steps_total_ns(profile)
    material = total_ns >= 0.01 * steps_ns if steps_ns else bool(events)
    if not material or (len(events) < min_compiles and not repeated):
        return
    share = total_ns / steps_ns if steps_ns else 0.0
    worst = max(repeated.items(), key=lambda kv: len(kv[1]), default=None)
    which = f"; {worst[0]} was compiled {len(worst[1])} times" if worst else ""
    severity = "error" if share >= 0.2 else RULE.severity
    yield Finding(
        rule=RULE.id,
        severity=severity,
        title=f"{len(events)} compilation{'s' if len(events) != 1 else ''} inside the profiled steps took {ms(total_ns)}"
              f"{f' ({pct(share)} of step time)' if steps_ns else ''}{which}",
        evidence={
            "compilations": len(events),
            "compile_time_ms": round(total_ns / 1e6, 3),
            "share_of_step_time": round(share, 4),
            "functions_compiled_more_than_once": {k: len(v) for k, v in repeated.items()},
            "steps": len(profile.steps),
        },
        recommendation=Recommendation(
            text="keep the step's input signature fixed: pad or bucket shapes, drop ragged last batches, "
                 "use static_argnames only for flags with few values, pass changing numbers as arrays",
            expected=Expected("step_time", round(per_step(profile, total_ns) / 1e6, 3), "ms",
                              f"{ms(per_step(profile, total_ns))} per step on average, the measured compile time"),
            cost="padding computes on filler elements; bucketing compiles once per bucket",
        ),
        impact=min(share, 1.0) if steps_ns else 0.5,
    )


RULE = Rule(
    id="recompilation",
    severity="warning",
    backends=("cpu", "gpu", "tpu"),
    summary="XLA compilation inside the profiled steps (the same function compiled again)",
    check=check,
    doc=__doc__,
)
