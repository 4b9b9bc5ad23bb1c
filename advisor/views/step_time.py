"""The step's time (`views.step_time.of(profile)`): each step as the slowest host saw it, their
median (the run's step time), the step program's op time, and one device's op time per step by
category, the device's idle time in the steps included: what a baseline records and `compare`
compares, what the HTML report plots per step.
"""
from __future__ import annotations

import dataclasses
import statistics
from typing import Any, Optional

from ..categories import categorize
from ..model import Profile
from . import idle
from .bound import cached


@dataclasses.dataclass(frozen=True)
class StepTime:
    step_times_ms: list[float]              # each profiled step, the slowest host's
    category_ms_per_step: dict[str, float]  # one device's op time per step by category, most first
    durations_ns: tuple[float, ...] = ()    # each profiled step as the slowest host (and so device) saw it
    median_ns: Optional[float] = None       # their median: the run's step time (None: no steps)
    step_program_op_ns: float = 0.0         # the step program's op self time over the window, containers left out
    steps_ns: float = 0.0                   # the profiled steps' total time (the first host's)
    notes: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"step_times_ms": list(self.step_times_ms), "category_ms_per_step": dict(self.category_ms_per_step)}


def of(profile: Profile) -> StepTime:
    return cached(profile, "step_time", _build)


def durations_ns(profile: Profile) -> list[float]:
    """Each step's duration as the slowest host sees it (hosts lined up by step number)."""
    if len(profile.hosts) < 2:
        return [s.duration_ns for s in profile.steps]
    out = []
    for step in profile.steps:
        times = [t for t in (h.step_ns(step.number) for h in profile.hosts) if t is not None]
        out.append(max(times, default=step.duration_ns))
    return out


def op_time_ns(profile: Profile, module: Optional[str] = None) -> float:
    """Op self time (of one program, or all), control-flow containers excluded (their bodies are counted)."""
    return sum(o.self_ns for o in profile.ops
               if (module is None or o.module == module) and not profile.is_container(o))


def _build(p: Profile) -> StepTime:
    steps = max(len(p.steps), 1)
    cats: dict[str, float] = {}
    active = p.active_devices
    if active:
        for d in active:
            for k, v in d.time_by_category.items():
                cats[k] = cats.get(k, 0.0) + v
    else:
        for op in p.ops:
            if op.module == p.step_module and not p.is_container(op):
                k = categorize(p.instruction(op), op.name)
                cats[k] = cats.get(k, 0.0) + op.self_ns
    devices = max(1, len(p.hosts[0].devices)) if p.hosts else 1
    cats = {k: v / devices for k, v in cats.items()}     # one device's share: never a sum over devices
    view = idle.of(p)
    if view is not None:      # per step (a warm-up left out), times the steps divided by below
        cats["host (device idle)"] = view.per_step_ns * len(p.steps)
    durations = durations_ns(p)
    return StepTime(step_times_ms=[round(ns / 1e6, 3) for ns in durations],
                    category_ms_per_step={k: round(v / steps / 1e6, 3)
                                          for k, v in sorted(cats.items(), key=lambda kv: -kv[1])},
                    durations_ns=tuple(durations), median_ns=statistics.median(durations) if p.steps else None,
                    step_program_op_ns=op_time_ns(p, p.step_module) if p.step_module else 0.0,
                    steps_ns=sum(s.duration_ns for s in p.steps))


def per_step(profile: Profile, total_ns: float) -> float:
    """A total over the profiled window, divided by the number of steps (1 when unknown)."""
    return total_ns / max(len(profile.steps), 1)


def steps_total_ns(profile: Profile) -> float:
    """The profiled steps' total time."""
    return of(profile).steps_ns
