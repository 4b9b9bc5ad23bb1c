"""What the efficiency verdict rests on (`summary.efficiency.verdict_basis`): the share of the step its
own state takes, beside the states no bound is drawn from: the device idle, device time in no op of a
program whose HLO the trace holds (unattributed), and ops whose bound is unknown (custom calls without
a FLOP count, or no peaks).

A verdict drawn from a small share of the step says so: when one of those states takes more of the
step than the verdict's own, the verdict leads with it ("mostly idle: the device is idle 88% of the
traced window; the rest: memory-bandwidth-bound: ..."), so a device that mostly waits is never
called memory-bound on the strength of 7% of its time.

Shares are of the step on one device (the mean over devices), or of the traced window when the trace
has no steps. Idle is the idle view's (host-bound's measure) where the steps allow it, else on a GPU
or TPU the devices' own idle time over the window; on the CPU backend op events do not cover the
executor's work (advisor/views/idle.py), so without the view idle is not estimated there.
"""
from __future__ import annotations

import collections
from typing import Any, Optional

from ..model import Profile
from . import activity, idle

STATES = ("idle", "unattributed", "unknown-bound")


def verdict_basis(profile: Profile, rows: list, bounds: dict, peak, per: int, step_s: Optional[float],
                  bound: Optional[str]) -> Optional[dict[str, Any]]:
    """The verdict's share of the step and the states beside it (None without a bound or a step time)."""
    if bound is None or not step_s:
        return None
    step_ns = step_s * 1e9
    by_bound: dict[str, float] = collections.defaultdict(float)
    for r in rows:
        by_bound[bounds[id(r)] or "unknown"] += r.time_ns / per
    idle_share = _idle_share(profile)
    devices = [d for d in activity.of(profile).devices if d.step_ns]
    exposed = sum(min(1.0, d.exposed_ns / d.step_ns) for d in devices) / len(devices) if devices else 0.0
    own = {"host": idle_share or 0.0, "communication": exposed}.get(bound, by_bound.get(bound, 0.0) / step_ns)
    states = {"idle": idle_share if bound != "host" else None,
              "unattributed": _unattributed(profile, rows, per, step_ns),
              "unknown-bound": by_bound.get("unknown", 0.0) / step_ns}
    states = {k: round(min(1.0, v), 4) for k, v in states.items() if v is not None}
    larger = {k: v for k, v in states.items() if v > min(own, 1.0)}
    return {"state": bound, "share_of_step": round(min(own, 1.0), 4), "states": states,
            "dominant": max(larger, key=larger.get) if larger else None,
            "unknown_bound_ops": sorted({r.instruction.label for r in rows
                                         if bounds[id(r)] is None and r.flops is None})[:4],
            "peaks": peak is not None}


def _idle_share(profile: Profile) -> Optional[float]:
    view = idle.of(profile)
    if view is not None:
        return view.share
    if profile.backend == "cpu":
        return None         # op events are dispatches there: their gaps are not idle time
    devices = [d for d in activity.of(profile).devices if d.step_ns]
    return sum(min(1.0, d.idle_ns / d.step_ns) for d in devices) / len(devices) if devices else None


def _unattributed(profile: Profile, rows: list, per: int, step_ns: float) -> float:
    """Device time in no op row: on GPU and TPU the devices' busy time the rows leave over (kernels
    without an HLO op, ops of programs without HLO); on the CPU backend the ops of programs without HLO."""
    devices = [d for d in activity.of(profile).devices if d.step_ns]
    if profile.backend == "cpu" or not devices:
        count = max(1, len({o.device for o in profile.ops}))
        orphan = sum(o.self_ns for o in profile.ops if o.module not in profile.modules and not profile.is_container(o))
        return orphan / count / per / step_ns
    busy = sum(min(1.0, d.busy_ns / d.step_ns) for d in devices) / len(devices)
    return max(0.0, busy - sum(r.time_ns for r in rows) / per / step_ns)


def with_basis(verdict: str, basis: Optional[dict[str, Any]], steps: int) -> str:
    """The verdict led by the state that takes more of the step than the verdict's own, if one does."""
    if not basis or not basis["dominant"]:
        return verdict
    state, share = basis["dominant"], basis["states"][basis["dominant"]]
    where = "step" if steps else "traced window"
    if state == "idle":
        what = f"the device is idle {share:.0%} of the {where}"
    elif state == "unattributed":
        what = f"{share:.0%} of the {where} the device runs work that no program's HLO in the trace describes"
    else:
        why = (f"{', '.join(basis['unknown_bound_ops'])}: no FLOP count in the HLO" if basis["unknown_bound_ops"]
               else "no peaks: pass --peak-flops and --peak-bandwidth")
        what = f"ops whose bound is unknown take {share:.0%} of the {where} ({why})"
        verdict = verdict.split("; more op time (", 1)[0]     # the caveat that says the same
    label = {"idle": "idle", "unattributed": "unattributed", "unknown-bound": "of unknown bound"}[state]
    head = f"mostly {label}" if share >= 0.5 else f"more {label} than {basis['state']}-bound"
    return f"{head}: {what}; the rest: {verdict}"
