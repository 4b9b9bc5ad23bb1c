"""The step's time (`views.step_time.of(profile)`): each step as the slowest host saw it, and one
device's op time per step by category, the device's idle time in the steps included: what a
baseline records and `compare` compares, what the HTML report plots per step.
"""
from __future__ import annotations

import dataclasses
from typing import Any

from ..categories import categorize
from ..model import Profile
from . import idle
from .bound import cached


@dataclasses.dataclass(frozen=True)
class StepTime:
    step_times_ms: list[float]              # each profiled step, the slowest host's
    category_ms_per_step: dict[str, float]  # one device's op time per step by category, most first

    def to_json(self) -> dict[str, Any]:
        return {"step_times_ms": list(self.step_times_ms), "category_ms_per_step": dict(self.category_ms_per_step)}


def of(profile: Profile) -> StepTime:
    return cached(profile, "step_time", _build)


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
    return StepTime(step_times_ms=[round(ns / 1e6, 3) for ns in p.step_durations_ns()],
                    category_ms_per_step={k: round(v / steps / 1e6, 3)
                                          for k, v in sorted(cats.items(), key=lambda kv: -kv[1])})
