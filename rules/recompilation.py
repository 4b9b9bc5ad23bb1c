"""recompilation: XLA compiles inside the profiled steps.

## What it does
Counts the compilations (`pxla.py compile` on the Python thread, or the PjRt client's
`Compile` when the Python tracer is off) that land inside a profiled step after the first,
adds up their time, and names the program that was compiled again: of the functions that
ran inside the window with more than one compiled program, the one with the most op time
(the step, not a helper such as `jit_dynamic_slice` it calls), with its source line and
what changed between its programs (the entry parameters' shapes and dtypes, from the HLO).
A first compile (the trace starts at the first call, no warm-up) is a note, not a finding.

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
- `min_compiles` (default 1): fire at this many compilations inside the steps after the
  first, only when compiling takes at least 1% of step time.
"""

from __future__ import annotations

import collections
from typing import Optional

from advisor.message import Message
from advisor.model import HloModule, Profile
from advisor.rule import Rule
from advisor.views.idle import compiles, warm_up_step

MESSAGE = Message(
    title="{count} compilation{s} inside the steps after the first took {total:ms} ({share:pct} of their time){which}"
          "{what}",
    fix="keep {name}'s input signature fixed{what}: pad or bucket shapes, drop ragged last batches, use "
        "static_argnames only for flags with few values, pass changing numbers as arrays",
    gain="{saving:ms} per step on average, the measured compile time",
    cost="padding computes on filler elements; bucketing compiles once per bucket",
)


def _signature(module: HloModule) -> list[str]:
    """The entry computation's parameters, as `name: dtype[dims]` in parameter order."""
    params = [i for i in module.instructions.values() if i.opcode == "parameter" and i.computation.startswith("main")]
    return [f"{i.name.split('.')[0]}: {i.shape}" for i in params]


def _changed(programs: list[HloModule]) -> list[str]:
    """What differs between the programs of one function: parameters whose shape or dtype changed."""
    sigs = [_signature(m) for m in sorted(programs, key=lambda m: m.program_id)]
    out = []
    for i, first in enumerate(sigs[0]):
        seen = [s[i] if i < len(s) else "-" for s in sigs]
        if len(set(seen)) > 1:
            name = first.split(":")[0]
            out.append(f"{name}: " + " -> ".join(dict.fromkeys(v.split(": ")[-1] for v in seen)))
    if not out and len({len(s) for s in sigs}) > 1:
        out.append("parameter count: " + " -> ".join(str(len(s)) for s in sigs))
    return out


def _recompiled(profile: Profile) -> Optional[tuple[str, list[HloModule]]]:
    """The function that ran with more than one program inside the window and took the most op time."""
    ran = collections.defaultdict(float)
    for op in profile.ops:
        ran[op.module] += op.self_ns
    by_name = collections.defaultdict(list)
    for key in ran:
        if key in profile.modules:
            by_name[profile.modules[key].name].append(profile.modules[key])
    repeated = {n: ms_ for n, ms_ in by_name.items() if len(ms_) > 1}
    if not repeated:
        return None
    name = max(repeated, key=lambda n: sum(ran[m.key] for m in repeated[n]))
    return name, repeated[name]


def _in_later_steps(profile: Profile):
    first = warm_up_step(profile) or (profile.steps[0] if profile.steps else None)
    later = [s for s in profile.steps if s is not first]
    return [e for e in compiles(profile)
            if any(e.start_ns < s.end_ns and e.start_ns + e.duration_ns > s.start_ns for s in later)]


ESCALATE_SHARE = 0.2    # compiling this share of step time or more is an error, not a warning


def check(profile: Profile, min_compiles: int = 1):
    if len(profile.steps) < 2:
        return   # one step (or none): any compile in it is the first one
    events = _in_later_steps(profile)
    steps = profile.steps[1:]
    steps_ns = sum(s.duration_ns for s in steps)
    total_ns = sum(e.duration_ns for e in events)
    if len(events) < min_compiles or steps_ns <= 0 or total_ns < 0.01 * steps_ns:
        return
    share = total_ns / steps_ns
    found = _recompiled(profile)
    name, programs = found if found else (None, [])
    changed = _changed(programs) if programs else []
    source = None
    for module in programs:
        source = next((str(i.source) for i in module.instructions.values() if i.source), None)
        if source:
            break
    yield RULE.finding(
        profile, severity="error" if share >= ESCALATE_SHARE else None, impact=min(share, 1.0), source=source,
        count=len(events), s="s" if len(events) != 1 else "", total=total_ns, share=share, name=name or "the step",
        which=f"; {name} ran as {len(programs)} different programs" if name else "", saving=total_ns / len(steps),
        what=f" ({'; '.join(changed)})" if changed else "",
        evidence={
            "compilations": len(events),
            "compile_time_ms": round(total_ns / 1e6, 3),
            "share_of_step_time": round(share, 4),
            "recompiled_function": name,
            "programs": [m.key for m in sorted(programs, key=lambda m: m.program_id)],
            "changed": changed,
            "steps": len(profile.steps),
        })


def notes(profile: Profile) -> list[str]:
    first = warm_up_step(profile)
    if first is None and len(profile.steps) != 1:
        return []
    step = first or profile.steps[0]
    n = sum(1 for e in compiles(profile) if e.start_ns < step.end_ns and e.start_ns + e.duration_ns > step.start_ns)
    if not n:
        return []
    return [f"the first profiled step includes {n} compilation{'s' if n != 1 else ''}, counted as a warm-up, "
            "not as recompilation: run one step before profiling to leave it out"]


RULE = Rule(
    id="recompilation",
    severity="warning",
    backends=("cpu", "gpu", "tpu"),
    summary="XLA compiles inside profiled steps after the first (the same function compiled again)",
    escalation="error when compiling takes 20% or more of step time",
    check=check,
    message=MESSAGE,
    needs=("two steps",),
    doc=__doc__,
    notes=notes,
)
