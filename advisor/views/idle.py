"""The device's idle time in the profiled steps: one measure, read by the host-bound rule, the
efficiency verdict and `compare`.

Busy is when the device has work in flight: on the CPU backend, from the first op to the last op
of each execution of a program; on GPU and TPU, the device's kernels and copies. Idle is the rest
of the steps, less a first step that includes compilation (a warm-up).

Why executions and not the union of ops on the CPU backend: an XLA:CPU op event records the op's
dispatch, not its work. A matmul handed to the thread pool shows a `dot` event of about a
millisecond, its `end: dot` marker tens of ms later, and the pool threads' work between them only
as `ThreadpoolListener` regions. The union of op events leaves that work out and reads 31-32%
idle on clean corpus programs (clean_mlp, scan16_checkpoint, numpy_loader_mlp) whose executions
follow one another with no gap (0-2% idle). Inside an execution the executor threads are working
(a pool region or an op is open), so nothing in the trace separates "waiting" from "working"
there; between executions the device is waiting for the host to dispatch the next step.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Optional

from ..model import Profile, Step, overlap_ns
from .bound import MIN_IDLE_SHARE as MIN_SHARE
from .bound import cached, settings

LAUNCH_GAP_NS = 20_000.0    # on a GPU, a gap this short between kernels is the launch of the next one
CACHE_HIT_NS = 1e6   # a Python-side "compile" this short, with no backend compile in it, found the program cached


@dataclasses.dataclass(frozen=True)
class Idle:
    steps: list[Step]           # the steps measured: the profiled steps less a warm-up
    step_ns: float              # their total time
    idle_ns: float              # their total time with no device work in flight
    warm_up: Optional[Step]     # the first step, left out because it compiles
    min_share: float = MIN_SHARE    # the share from which the steps are host-bound (host-bound's option)
    launch_ns: float = 0.0      # GPU/TPU: of idle_ns, the gaps under LAUNCH_GAP_NS between device work
    launch_gaps: int = 0        # how many such gaps
    notes: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"steps": len(self.steps), "idle_ms": round(self.idle_ns / 1e6, 3), "share": round(self.share, 4),
                "launch_ms": round(self.launch_ns / 1e6, 3), "host_bound": self.host_bound}

    @property
    def share(self) -> float:
        return self.idle_ns / self.step_ns if self.step_ns > 0 else 0.0

    @property
    def host_share(self) -> float:
        """The idle share the host leaves the device in longer waits: a wait for a value, a copy, Python.
        The gaps between kernels launched one by one are launch latency (the launch-bound rule's), not this."""
        return (self.idle_ns - self.launch_ns) / self.step_ns if self.step_ns > 0 else 0.0

    @property
    def launch_share(self) -> float:
        return self.launch_ns / self.step_ns if self.step_ns > 0 else 0.0

    @property
    def host_bound(self) -> bool:
        """Idle enough to call the steps host-bound: the host-bound rule fires and the verdict may say so."""
        return self.host_share >= self.min_share

    @property
    def per_step_ns(self) -> float:
        return self.idle_ns / len(self.steps) if self.steps else 0.0


def of(profile: Profile) -> Optional[Idle]:
    """The idle time in the steps; None without steps or busy time. Host-bound from the bound
    settings' min_idle_share (the host-bound rule's option, where the user set it)."""
    return cached(profile, "idle", lambda p: build(p, settings(p).min_idle_share))


def build(profile: Profile, min_share: float = MIN_SHARE) -> Optional[Idle]:
    first = warm_up_step(profile)
    steps = [s for s in profile.steps if s is not first]
    total = sum(s.duration_ns for s in steps)
    if not steps or not profile.busy or total <= 0:
        return None
    idle_ns = max(0.0, busy_and_idle(profile.busy, steps)[1])
    launch_ns, launch_gaps = _launch_gaps(profile, steps) if profile.backend in ("gpu", "tpu") else (0.0, 0)
    return Idle(steps=steps, step_ns=total, idle_ns=idle_ns, warm_up=first, min_share=min_share,
                launch_ns=launch_ns, launch_gaps=launch_gaps)


def busy_and_idle(spans, steps: list[Step]) -> tuple[float, float]:
    """(busy, idle) in the steps, ns: how much of each step the merged spans cover, summed, and the
    rest of the steps' time (a sum's rounding may leave it a hair below 0). The one measure of
    idle: the run's (the device's busy spans, a warm-up left out), each accelerator's in
    `summary.devices[].idle_in_steps_ms` (its plane's spans); the
    activity view's per device is the same difference, its steps' time less its ops' (the loader's
    streamed totals)."""
    total = sum(s.duration_ns for s in steps)
    busy = sum(overlap_ns(spans, s.start_ns, s.end_ns) for s in steps)
    return busy, total - busy


def _launch_gaps(profile: Profile, steps: list[Step]) -> tuple[float, int]:
    """(time, count) of the gaps under LAUNCH_GAP_NS between the device's busy spans inside the steps:
    kernels launched one by one, each waiting for the host's next launch."""
    busy = profile.busy
    total, count = 0.0, 0
    for s in steps:
        inside = [(max(a, s.start_ns), min(b, s.end_ns)) for a, b in busy if a < s.end_ns and b > s.start_ns]
        for (_, end), (start, _) in zip(inside, inside[1:]):
            gap = start - end
            if 0 < gap < LAUNCH_GAP_NS:
                total += gap
                count += 1
    return total, count


def compiles(profile: Profile) -> list:
    """Compile events, one per compilation (the Python-side event wraps the PjRt client's).

    A Python-side `compile` that wraps no backend compile is a compilation-cache hit (jit's slow
    path finding the executable it already has: 10-15 us), not a compilation; where the trace has
    no backend compile events at all, one shorter than 1 ms is taken for a hit."""
    events = [e for e in profile.host_events if e.category == "compile"]
    python_side = [e for e in events if e.name.startswith("$")]
    backend = [e for e in events if not e.name.startswith("$")]
    if not python_side:
        return events

    def compiled(e) -> bool:
        if not backend:
            return e.duration_ns >= CACHE_HIT_NS
        end = e.start_ns + e.duration_ns
        return any(b.start_ns >= e.start_ns and b.start_ns < end for b in backend)
    return [e for e in python_side if compiled(e)]


def warm_up_step(profile: Profile) -> Optional[Step]:
    """The first profiled step when it includes a compilation (the one-time first compile), else None."""
    if len(profile.steps) < 2:
        return None
    first = profile.steps[0]
    hit = any(e.start_ns < first.end_ns and e.start_ns + e.duration_ns > first.start_ns for e in compiles(profile))
    return first if hit else None
