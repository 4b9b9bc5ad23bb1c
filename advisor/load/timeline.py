"""The timeline of one XSpace: what ran on each device and when, as `Timeline` (facts only).

Reads the space the loader opened (the streaming reader, `xplane_stream.StreamSpace`, or
`jax.profiler.ProfileData` with ADVISOR_READER=profiledata): the GPU/TPU planes' kernels and copies
(`device_planes`) or the CPU executor threads' ops (`host_lines`), into the op accumulator
(`op_accumulator`: self times per op, program executions, each device's ops as columns); the host
plane's step marks, compile, sync and transfer events, allocator events and kernel launches
(`host_lines.host_pass`); the steps (`steps`), and with `--steps A:B` the window every figure is
taken over. Only the stats a reader needs are read, and only on events that can carry them.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import numpy as np

from ..model import AllocatorPeak, DeviceSummary, HostEvent, OpStat, Step, Transfer, merge_intervals
from .columns import in_window
from .device_planes import Programs, device_plane
from .host_lines import (
    CPU_EXECUTOR_PREFIXES,
    AllocatorEvents,
    Launches,
    allocator_peaks,
    cpu_op_line,
    h2d_transfer,
    host_pass,
)
from .op_accumulator import NO_MODULE, DeviceOps, OpAccumulator
from .steps import device_timed, steps_from

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
    device_ops: Optional[DeviceOps] = None          # the ops each device ran, and its waits for peers
    steps_of_trace: int = 0                          # steps in the whole trace
    step_window: Optional[tuple[int, int]] = None    # (first, last) step number analyzed, when a window was asked


class StepWindowError(ValueError):
    """The steps asked for are not in the trace."""


def read_timeline(profile_data, steps: Optional[slice] = None, protos=None) -> Timeline:
    """The trace's timeline; with `steps` (a slice of step numbers: A to B-1), every figure is over
    those steps only: the ops, copies, host events and waits that start inside them. `protos(keys)`
    gives the HLO of programs by `name(program_id)`: the schedules that attribute the kernels of
    command buffers to their instructions."""
    acc = OpAccumulator()
    prefixes = ("/device:GPU", "/device:TPU")
    if hasattr(profile_data, "planes_named"):   # the streaming reader parses only these planes
        device_planes = profile_data.planes_named(prefixes)
    else:
        device_planes = [p for p in profile_data.planes if p.name.startswith(prefixes)]
    host = profile_data.find_plane_with_name("/host:CPU")
    meta = profile_data.find_plane_with_name("/host:metadata")
    host_stats = dict(meta.stats) if meta is not None else {}
    host_events: list[HostEvent] = []

    backend, device_name, device_stats = "cpu", "", {}
    programs = Programs(protos) if protos is not None else None
    planes = [device_plane(p, acc, programs) for p in device_planes]
    active = [r for r in planes if r.active]
    if active:
        backend = "tpu" if active[0].name.startswith("/device:TPU") else "gpu"
        first = next(p for p in device_planes if p.name == active[0].name)
        device_stats = dict(first.stats)
        device_name = active[0].summary.description + (f" (x{len(active)} active)" if len(active) > 1 else "")
    elif host is not None:
        plane_ids: dict[str, int] = {}
        caches: dict = {}
        for line in host.lines:
            if line.name.startswith(CPU_EXECUTOR_PREFIXES):
                cpu_op_line(line, acc, host_events, plane_ids, caches)
        if "cpu_version" not in host_stats and not acc.places:
            backend = "unknown"

    all_steps, alloc, launches = [], {}, Launches()
    alloc_events = AllocatorEvents() if steps is not None else None     # kept only to take peaks over a window
    if host is not None:
        marks, alloc = host_pass(host, host_events, launches if active else None, alloc_events)
        all_steps = steps_from(marks, acc.last_end_after, acc.step_runs())
        if active and all_steps:
            spans = [r.launch_spans() for r in planes]
            ids = np.concatenate([s[0] for s in spans])
            all_steps = device_timed(all_steps, marks, launches.launched_at(ids),
                                     np.concatenate([s[1] for s in spans]), np.concatenate([s[2] for s in spans]))
    window, chosen = None, all_steps
    if steps is not None:
        chosen = [s for s in all_steps if (steps.start is None or s.number >= steps.start)
                  and (steps.stop is None or s.number < steps.stop)]
        if not chosen:
            have = (f"steps {all_steps[0].number} to {all_steps[-1].number} ({len(all_steps)})" if all_steps
                    else "no steps")
            raise StepWindowError(f"no step in {_slice_text(steps)}: the trace has {have}")
        first = all_steps.index(chosen[0])
        if all_steps[first:first + len(chosen)] != chosen:
            raise StepWindowError(f"the steps in {_slice_text(steps)} are not one stretch of the trace: its step "
                                  "numbers repeat (e.g. counted per epoch), so a window of numbers is ambiguous")
        window = (chosen[0].start_ns, chosen[-1].end_ns)
        acc.window = window

    devices = [r.summarize(window) for r in planes]
    for record, summary in zip(planes, devices):
        g = record.graphs
        (summary.graph_launches, summary.graph_kernels,
         summary.graph_unattributed) = g.launches, g.kernels, g.unattributed
        why = g.why
        summary.graph_unattributed_why = "; ".join(f"{n} kernels: {w}" for w, n in why.items())
    for record, summary in zip(planes, devices):
        acc.device_busy.extend(summary.busy)
        busy = np.asarray(summary.busy, dtype=np.float64).reshape(-1, 2)
        queued, idle, calls = launches.split(*record.kernel_starts(window), busy[:, 0], busy[:, 1])
        summary.launches_matched = len(queued) + len(idle)
        summary.launches_queued = len(queued)
        summary.launch_queue_median_ns = _median(queued)
        summary.launch_overhead_median_ns = _median(idle)
        summary.launch_call_median_ns = _median(calls)
    transfers = [t for r in planes for t in r.transfers if in_window(t.start_ns, window)]
    host_events = [e for e in host_events if in_window(e.start_ns, window)]
    transfers.extend(h2d_transfer(e) for e in host_events if e.category == "transfer" and e.name.startswith("H2D"))
    host_events.sort(key=lambda e: e.start_ns)
    return Timeline(backend=backend, device_name=device_name, device_stats=device_stats,
                    ops=acc.stats(), steps=chosen, host_stats=host_stats, step_module=acc.step_module(),
                    busy=merge_intervals(acc.busy_spans()),
                    host_events=host_events, transfers=sorted(transfers, key=lambda t: t.start_ns),
                    devices=devices, allocators=allocator_peaks(alloc, alloc_events, window), device_ops=acc.device_ops,
                    steps_of_trace=len(all_steps),
                    step_window=(chosen[0].number, chosen[-1].number) if steps is not None else None,
                    )


def _slice_text(steps: slice) -> str:
    start = "" if steps.start is None else steps.start
    stop = "" if steps.stop is None else steps.stop
    return f"--steps {start}:{stop}"


def _median(sorted_values: np.ndarray) -> Optional[float]:
    """The middle of sorted values (the upper one of an even count), None for none."""
    return float(sorted_values[len(sorted_values) // 2]) if len(sorted_values) else None
