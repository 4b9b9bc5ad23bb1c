"""GPU and TPU device planes: kernels and copies, op self times, device facts."""

from __future__ import annotations

import dataclasses
from typing import Optional

import numpy as np

from ..model import SMALL_KERNEL_NS, DeviceSummary, Transfer, merge_intervals
from .columns import chunks_of, in_window
from .ops import NO_MODULE, OpAccumulator, module_key

_MEMCPY_KINDS = {"MemcpyH2D": "H2D", "MemcpyD2H": "D2H", "MemcpyD2D": "D2D", "MemcpyP2P": "P2P",
                 "MemcpyOther": "Other", "CopyDeviceToDevice": "D2D", "CopyHostToDevice": "H2D",
                 "CopyDeviceToHost": "D2H"}
_DEVICE_STATS = frozenset({"hlo_op", "hlo_module", "program_id", "memcpy_details", "kernel_details",
                           "correlation_id"})


class PlaneEvents:
    """What one GPU/TPU plane recorded, kept until the window of steps is known: each kernel's and
    copy's start and duration, copies as Transfers, kernel starts by CUPTI correlation id."""

    def __init__(self, summary: DeviceSummary):
        self.summary = summary        # the plane's description; counts and busy filled by summarize
        self.kernels: list[tuple[float, float]] = []
        self.compute: list[tuple[float, float]] = []      # every event that is not a copy
        self.copies: list[tuple[float, float]] = []
        self.transfers: list[Transfer] = []
        self.kernel_starts: dict[int, float] = {}

    @property
    def name(self) -> str:
        return self.summary.name

    @property
    def active(self) -> bool:
        return bool(self.kernels or self.copies)

    def summarize(self, window: Optional[tuple[float, float]]) -> DeviceSummary:
        """The plane's DeviceSummary over the window (events that start inside it), or the trace."""
        summary = dataclasses.replace(self.summary)
        for start, dur in self.copies:
            if in_window(start, window):
                summary.memcpy_count += 1
                summary.memcpy_ns += dur
        for start, dur in self.kernels:
            if in_window(start, window):
                summary.kernel_count += 1
                summary.kernel_ns += dur
                if dur < SMALL_KERNEL_NS:
                    summary.small_kernel_count += 1
                    summary.small_kernel_ns += dur
        summary.busy = merge_intervals((s, s + d) for s, d in self.compute if in_window(s, window))
        return summary


def device_plane(plane, acc: OpAccumulator) -> PlaneEvents:
    """Kernels and copies of one GPU (or TPU) plane: ops into acc, the rest into PlaneEvents."""
    record = PlaneEvents(_describe(plane.name, dict(plane.stats)))
    tpu = plane.name.startswith("/device:TPU")
    plane_ids: dict[str, int] = {}
    for line in plane.lines:
        if not (line.name.startswith("Stream") or tpu):
            continue   # derived lines (XLA Ops, Steps, ...) repeat the stream events
        starts_out, durs_out, places, names = [], [], [], []
        for chunk in chunks_of(line, plane_ids):
            for i, (start, dur, meta) in enumerate(zip(chunk.start_ns.tolist(), chunk.dur_ns.tolist(),
                                                       chunk.ids.tolist())):
                name = chunk.names.get(meta, "")
                stats = chunk.stats(i, _DEVICE_STATS)
                kind = _MEMCPY_KINDS.get(name)
                details = stats.get("memcpy_details")
                if kind or details:
                    record.transfers.append(Transfer(kind=kind or _memcpy_kind(str(details)), start_ns=start,
                                                     duration_ns=dur, bytes=_memcpy_bytes(details),
                                                     device=plane.name))
                    record.copies.append((start, dur))
                else:
                    record.compute.append((start, dur))   # computing; a copy engine alone is not
                    if stats.get("kernel_details"):
                        if "correlation_id" in stats:
                            record.kernel_starts[int(stats["correlation_id"])] = start
                        record.kernels.append((start, dur))
                op = stats.get("hlo_op")
                module = NO_MODULE if op is None else module_key(stats)
                starts_out.append(start)
                durs_out.append(dur)
                places.append(acc.place_id(module, None, plane.name))
                names.append(acc.name_id(name if op is None else str(op).split("::")[-1]))
        acc.add_line(np.array(starts_out, dtype=np.float64), np.array(durs_out, dtype=np.float64),
                     np.array(places, dtype=np.int64), np.array(names, dtype=np.int64), plane.name)
    return record


def _describe(name: str, stats: dict) -> DeviceSummary:
    vendor = str(stats.get("device_vendor", "") or "")
    major, minor = stats.get("compute_cap_major"), stats.get("compute_cap_minor")
    cc = f"{major}.{minor}" if major is not None else ""
    cores = int(stats["core_count"]) if stats.get("core_count") else None
    clock = float(stats["clock_rate"]) / 1000 if stats.get("clock_rate") else None   # kHz -> MHz
    memory = int(stats["memory_size"]) if stats.get("memory_size") else None
    bandwidth = int(stats["memory_bandwidth"]) if stats.get("memory_bandwidth") else None
    kind = name.split(":")[1] if name.count(":") >= 2 else "device"
    text = str(stats.get("gpu_device_name") or "") or (f"{vendor} {kind}" if vendor else kind)
    parts = [text]
    if cc:
        parts.append(f"compute capability {cc}" if vendor.lower() != "amd" else f"gfx {cc}")
    if cores:
        parts.append(f"{cores} {'CUs' if vendor.lower() == 'amd' else 'SMs'}")
    if memory:
        parts.append(f"{memory / 2**30:.1f} GiB")
    return DeviceSummary(name=name, description=", ".join(parts), vendor=vendor, compute_capability=cc,
                         core_count=cores, clock_mhz=clock, memory_bytes=memory,
                         memory_bandwidth_bytes_per_s=bandwidth)


def _memcpy_bytes(details) -> Optional[int]:
    """`size:<bytes>` of CUPTI's memcpy_details ("kind_src:.. kind_dst:.. size:4096 dest:0 async:1")."""
    for token in str(details or "").split():
        if token.startswith("size:"):
            try:
                return int(token[5:])
            except ValueError:
                return None
    return None


def _memcpy_kind(details: str) -> str:
    fields = dict(t.split(":", 1) for t in details.split() if ":" in t)
    src, dst = fields.get("kind_src", ""), fields.get("kind_dst", "")
    host = ("pageable", "pinned")
    if src in host and dst not in host:
        return "H2D"
    if dst in host and src not in host:
        return "D2H"
    return "D2D" if src and dst else "Other"
