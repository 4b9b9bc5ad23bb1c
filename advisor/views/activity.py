"""What each device did per step (`views.activity.of(profile)`): compute, collective transfer,
waiting for peers, exposed collective time and idle, its longest ops, and the slowest device.

From the loader's totals over the steps (`model.DeviceTotals`), divided by the host's step count:
compute + transfer + wait + idle is the step time. Where a collective has no wait-for-peers
events on any device (gloo across processes, GPU kernels), each device's wait in it is estimated
as its time beyond the shortest device's (the last to arrive waits least): a note says so.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Optional

from ..model import DeviceTotals, Host, Profile
from .bound import cached

TOP_OPS = 12       # ops named per device, by time: enough to say where a straggler's extra time goes


@dataclasses.dataclass(frozen=True)
class DeviceActivity:
    """One device's figures per step (the mean over its host's steps)."""
    name: str                       # "cpu:3" (CPU backend) or the plane, e.g. "/device:GPU:0"
    host: str                       # the host file's name, e.g. "worker0"
    compute_ns: float               # per step: ops other than collectives
    transfer_ns: float              # per step: collectives, less waiting for peers
    wait_ns: float                  # per step: waiting for peers inside collectives
    exposed_ns: float               # per step: collective time with no compute of this device beside it
    idle_ns: float                  # per step: no op running on the device
    step_ns: float                  # per step: the host's step time (the traced window when steps is 0)
    steps: int                      # steps measured; 0: the trace has none, figures are over its window
    collectives: dict[str, float] = dataclasses.field(default_factory=dict)   # HLO instruction -> ns per step
    collective_wait: dict[str, float] = dataclasses.field(default_factory=dict)  # instruction -> wait ns per step
    # instruction -> ns per step of it with compute of this device beside it (hidden); absent: none
    collective_hidden: dict[str, float] = dataclasses.field(default_factory=dict)
    peak_bytes: Optional[int] = None        # the device's memory peak (step program, or its allocator)
    top_ops: dict[str, float] = dataclasses.field(default_factory=dict)   # its longest non-collective ops, ns/step
    time_by_category: dict[str, float] = dataclasses.field(default_factory=dict)  # op time by category, ns per step

    @property
    def busy_ns(self) -> float:
        return self.compute_ns + self.transfer_ns + self.wait_ns

    def to_json(self, slowest: bool = False) -> dict[str, Any]:
        """As in `runs[].summary.devices` (ms per step)."""
        return {
            "name": self.name,
            "host": self.host,
            "compute_ms": round(self.compute_ns / 1e6, 3),
            "collective_transfer_ms": round(self.transfer_ns / 1e6, 3),
            "collective_wait_ms": round(self.wait_ns / 1e6, 3),
            "collective_exposed_ms": round(self.exposed_ns / 1e6, 3),
            "idle_ms": round(self.idle_ns / 1e6, 3),
            "step_mean_ms": round(self.step_ns / 1e6, 3),
            "steps": self.steps,
            "collectives_ms": {k: round(v / 1e6, 3) for k, v in sorted(self.collectives.items(),
                                                                      key=lambda kv: -kv[1])},
            "category_ms": {k: round(v / 1e6, 3) for k, v in self.time_by_category.items()},
            "peak_memory_bytes": self.peak_bytes,
            "slowest": slowest,
        }


@dataclasses.dataclass(frozen=True)
class Activity:
    devices: tuple[DeviceActivity, ...]         # every device of every host, in host then device order
    compile_ns: dict[str, float] = dataclasses.field(default_factory=dict)   # host -> compiling in its steps, per step
    estimated: tuple[str, ...] = ()             # collectives whose waits are estimated (no wait events)
    notes: tuple[str, ...] = ()

    @property
    def slowest(self) -> Optional[DeviceActivity]:
        """The device that computes longest per step (the others wait for it at collectives)."""
        return max(self.devices, key=lambda d: d.compute_ns) if self.devices else None

    def of_host(self, host: str) -> list[DeviceActivity]:
        return [d for d in self.devices if d.host == host]

    def to_json(self) -> list[dict[str, Any]]:
        slowest = self.slowest if len(self.devices) > 1 else None
        return [d.to_json(d is slowest) for d in self.devices]


def of(profile: Profile) -> Activity:
    return cached(profile, "activity", build)


def build(profile: Profile) -> Activity:
    devices = [_per_step(d) for d in profile.device_totals]
    estimated = _estimate_peer_waits(devices)
    notes = (f"{len(estimated)} collective(s) of the step carry no wait-for-peers events (e.g. gloo across hosts, "
             "GPU kernels): each device's wait in them is estimated as its time beyond the shortest device's time "
             "in the same collective",) if estimated else ()
    return Activity(devices=tuple(DeviceActivity(**d) for d in devices),
                    compile_ns={h.name: _compile_per_step(h) for h in profile.hosts},
                    estimated=tuple(estimated), notes=notes)


def _compile_per_step(host: Host) -> float:
    return host.compile_in_steps_ns / len(host.steps) if host.steps else 0.0


def _per_step(d: DeviceTotals) -> dict[str, Any]:
    count = max(1, d.steps)
    wait_ns = min(d.collective_ns, d.wait_ns)
    return dict(
        name=d.name, host=d.host,
        compute_ns=max(0.0, d.busy_ns - d.collective_ns) / count,
        transfer_ns=max(0.0, d.collective_ns - wait_ns) / count,
        wait_ns=wait_ns / count,
        exposed_ns=max(0.0, d.collective_ns - d.hidden_ns) / count,
        idle_ns=max(0.0, d.window_ns - d.busy_ns) / count,
        step_ns=d.window_ns / count, steps=d.steps,
        collectives={op: ns / count for op, ns in d.collectives.items()},
        collective_wait={op: ns / count for op, ns in d.collective_wait.items()},
        collective_hidden={op: ns / count for op, ns in d.collective_hidden.items() if ns > 0},
        peak_bytes=d.peak_bytes,
        time_by_category={c: ns / count for c, ns in sorted(d.time_by_category.items(), key=lambda kv: -kv[1])},
        top_ops={op: ns / count for op, ns in sorted(d.op_ns.items(), key=lambda kv: -kv[1])[:TOP_OPS]},
    )


def _estimate_peer_waits(devices: list[dict[str, Any]]) -> list[str]:
    """Where a collective has no wait-for-peers events on any device (gloo across processes, GPU
    kernels), estimate each device's wait as its time in that collective beyond the shortest
    time any device spent in it per step: the last to arrive waits least, the difference is
    waiting for it. Returns the collectives so estimated (for the run's notes)."""
    estimated = []
    ops = sorted({op for d in devices for op in d["collectives"]})
    for op in ops:
        having = [d for d in devices if op in d["collectives"]]
        if len(having) < 2 or any(d["collective_wait"].get(op, 0.0) > 0 for d in having):
            continue
        shortest = min(d["collectives"][op] for d in having)
        for d in having:
            extra = d["collectives"][op] - shortest
            d["collective_wait"][op] = extra
            d["wait_ns"] += extra
            d["transfer_ns"] = max(0.0, d["transfer_ns"] - extra)
        estimated.append(op)
    return estimated
