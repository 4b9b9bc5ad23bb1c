"""Read the timeline of an XSpace with `jax.profiler.ProfileData`: op self times and steps.

Only the stats we need are read, and only on events that can carry them: reading every
event's stats costs several times the parse itself on large traces.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

from ..model import AllocatorPeak, DeviceSummary, HostEvent, OpStat, Step, Transfer, merge_intervals
from .device_planes import device_plane
from .host_lines import CPU_EXECUTOR_PREFIXES, cpu_op_events, h2d_transfer, host_pass
from .ops import NO_MODULE, OpAccumulator
from .steps import steps_from

__all__ = ["NO_MODULE", "Timeline", "read_timeline"]


@dataclasses.dataclass
class Timeline:
    backend: str
    device_name: str
    device_stats: dict
    ops: list[OpStat]
    steps: list[Step]
    host_stats: dict
    step_module: Optional[str] = None
    busy: list[tuple[float, float]] = dataclasses.field(default_factory=list)   # merged op-busy intervals
    host_events: list[HostEvent] = dataclasses.field(default_factory=list)     # compile, sync, transfer
    transfers: list[Transfer] = dataclasses.field(default_factory=list)
    devices: list[DeviceSummary] = dataclasses.field(default_factory=list)
    allocators: list[AllocatorPeak] = dataclasses.field(default_factory=list)
    # device -> (start, end, module key, op) of each op it ran; device -> (start, end) waiting for peers
    device_ops: dict[str, list[tuple[float, float, str, str]]] = dataclasses.field(default_factory=dict)
    device_waits: dict[str, list[tuple[float, float]]] = dataclasses.field(default_factory=dict)


def read_timeline(profile_data) -> Timeline:
    acc = OpAccumulator()
    prefixes = ("/device:GPU", "/device:TPU")
    if hasattr(profile_data, "planes_named"):   # the streaming reader parses only these planes
        device_planes = profile_data.planes_named(prefixes)
    else:
        device_planes = [p for p in profile_data.planes if p.name.startswith(prefixes)]
    host = profile_data.find_plane_with_name("/host:CPU")
    meta = profile_data.find_plane_with_name("/host:metadata")
    host_stats = dict(meta.stats) if meta is not None else {}
    transfers: list[Transfer] = []
    host_events: list[HostEvent] = []
    waits: list[tuple[float, float, str]] = []

    backend, device_name, device_stats = "cpu", "", {}
    kernel_starts: dict[str, dict[int, float]] = {p.name: {} for p in device_planes}
    devices = [device_plane(p, acc, transfers, kernel_starts[p.name]) for p in device_planes]
    active = [d for d in devices if d.active]
    if active:
        backend = "tpu" if active[0].name.startswith("/device:TPU") else "gpu"
        first = next(p for p in device_planes if p.name == active[0].name)
        device_stats = dict(first.stats)
        device_name = active[0].description + (f" (x{len(active)} active)" if len(active) > 1 else "")
    elif host is not None:
        for line in host.lines:
            if line.name.startswith(CPU_EXECUTOR_PREFIXES):
                acc.add_line(cpu_op_events(line, host_events, waits))
        for start, end, device in waits:
            acc.device_waits.setdefault(device, []).append((start, end))
        if "cpu_version" not in host_stats and not acc.by_key:
            backend = "unknown"

    steps, allocators = [], []
    if host is not None:
        launches: dict[int, float] = {}
        marks, allocators = host_pass(host, host_events, launches if active else None)
        for d in devices:
            starts = kernel_starts[d.name]
            delays = sorted(start - launches[c] for c, start in starts.items() if c in launches)
            d.launches_matched = len(delays)
            d.launch_delay_median_ns = delays[len(delays) // 2] if delays else None
        steps = steps_from(marks, acc.intervals, acc.step_runs())
    transfers.extend(h2d_transfer(e) for e in host_events if e.category == "transfer" and e.name.startswith("H2D"))
    host_events.sort(key=lambda e: e.start_ns)
    return Timeline(backend=backend, device_name=device_name, device_stats=device_stats,
                    ops=acc.stats(), steps=steps, host_stats=host_stats, step_module=acc.step_module(), busy=merge_intervals(acc.busy_spans()),
                    host_events=host_events, transfers=sorted(transfers, key=lambda t: t.start_ns),
                    devices=devices, allocators=allocators, device_ops=acc.device_ops,
                    device_waits=acc.device_waits)
