"""GPU and TPU device planes: kernels and copies, op self times, device facts."""

from __future__ import annotations

import dataclasses
from typing import Optional

import numpy as np

from ..model import SMALL_KERNEL_NS, DeviceSummary, Transfer
from .columns import as_spans, chunks_of, merged
from .ops import NO_MODULE, OpAccumulator, module_key
from .xplane_stream import int_stat

_MEMCPY_KINDS = {"MemcpyH2D": "H2D", "MemcpyD2H": "D2H", "MemcpyD2D": "D2D", "MemcpyP2P": "P2P",
                 "MemcpyOther": "Other", "CopyDeviceToDevice": "D2D", "CopyHostToDevice": "H2D",
                 "CopyDeviceToHost": "D2H"}
_DEVICE_STATS = frozenset({"hlo_op", "hlo_module", "program_id", "memcpy_details", "kernel_details",
                           "correlation_id"})


class PlaneEvents:
    """What one GPU/TPU plane recorded, kept until the window of steps is known, as columns (one
    array per chunk read): each event's start and duration, whether it is a copy or a kernel, its
    CUPTI correlation id (-1: none), and the copies as Transfers."""

    def __init__(self, summary: DeviceSummary):
        self.summary = summary        # the plane's description; counts and busy filled by summarize
        self._pieces: list[tuple[np.ndarray, ...]] = []     # (start, duration, is copy, is kernel, correlation id)
        self.transfers: list[Transfer] = []

    @property
    def name(self) -> str:
        return self.summary.name

    @property
    def active(self) -> bool:
        return any(bool((copy | kernel).any()) for _, _, copy, kernel, _ in self._pieces)

    def add(self, starts, durs, copy, kernel, correlation) -> None:
        self._pieces.append((np.asarray(starts, dtype=np.float64), np.asarray(durs, dtype=np.float64),
                             np.asarray(copy, dtype=bool), np.asarray(kernel, dtype=bool),
                             np.asarray(correlation, dtype=np.int64)))

    def _columns(self, window) -> tuple[np.ndarray, ...]:
        if not self._pieces:
            return (np.empty(0), np.empty(0), np.empty(0, dtype=bool), np.empty(0, dtype=bool),
                    np.empty(0, dtype=np.int64))
        if len(self._pieces) > 1:      # joined once: summarize and kernel_starts both read them
            self._pieces = [tuple(np.concatenate([p[k] for p in self._pieces]) for k in range(5))]
        columns = self._pieces[0]
        if window is None:
            return columns
        inside = (columns[0] >= window[0]) & (columns[0] < window[1])
        return tuple(c[inside] for c in columns)

    def summarize(self, window: Optional[tuple[float, float]]) -> DeviceSummary:
        """The plane's DeviceSummary over the window (events that start inside it), or the trace."""
        summary = dataclasses.replace(self.summary)
        starts, durs, copy, kernel, _ = self._columns(window)
        summary.memcpy_count, summary.memcpy_ns = int(copy.sum()), _sum(durs[copy])
        summary.kernel_count, summary.kernel_ns = int(kernel.sum()), _sum(durs[kernel])
        small = kernel & (durs < SMALL_KERNEL_NS)
        summary.small_kernel_count, summary.small_kernel_ns = int(small.sum()), _sum(durs[small])
        compute = ~copy
        summary.busy = as_spans(*merged(starts[compute], starts[compute] + durs[compute]))
        return summary

    def kernel_starts(self, window) -> tuple[np.ndarray, np.ndarray]:
        """(correlation id, start) of the kernels that start in window: one per id, the last read."""
        starts, _, _, kernel, correlation = self._columns(None)
        has = kernel & (correlation >= 0)
        ids, starts = correlation[has][::-1], starts[has][::-1]
        ids, last = np.unique(ids, return_index=True)
        starts = starts[last]
        if window is not None:
            inside = (starts >= window[0]) & (starts < window[1])
            ids, starts = ids[inside], starts[inside]
        return ids, starts


def _sum(values: np.ndarray) -> float:
    total = 0.0
    for v in values.tolist():        # in order, as the events were read: the same float as before
        total += v
    return total


def device_plane(plane, acc: OpAccumulator) -> PlaneEvents:
    """Kernels and copies of one GPU (or TPU) plane: ops into acc, the rest into PlaneEvents.
    Each event's stats are read (a kernel's op and correlation id are its own), but what is kept
    is columns, a chunk at a time."""
    record = PlaneEvents(_describe(plane.name, dict(plane.stats)))
    tpu = plane.name.startswith("/device:TPU")
    plane_ids: dict[str, int] = {}
    for line in plane.lines:
        if not (line.name.startswith("Stream") or tpu):
            continue   # derived lines (XLA Ops, Steps, ...) repeat the stream events
        ops_line = acc.line(plane.name)
        for chunk in chunks_of(line, plane_ids, all_stats=True):
            n = len(chunk)
            copy, kernel = np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
            correlation = np.full(n, -1, dtype=np.int64)
            places, names = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
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
                    copy[i] = True
                elif stats.get("kernel_details"):
                    kernel[i] = True
                    corr = int_stat(stats.get("correlation_id"), "correlation_id", -1)
                    if 0 <= corr < 1 << 63:          # a uint32 widened; anything else is damage
                        correlation[i] = corr
                op = stats.get("hlo_op")
                module = NO_MODULE if op is None else module_key(stats)
                places[i] = acc.place_id(module, None, plane.name)
                names[i] = acc.name_id(name if op is None else str(op).split("::")[-1])
            record.add(chunk.start_ns, chunk.dur_ns, copy, kernel, correlation)
            ops_line.add(chunk.start_ns, chunk.dur_ns, places, names)
        ops_line.close()
    return record


def _describe(name: str, stats: dict) -> DeviceSummary:
    vendor = str(stats.get("device_vendor", "") or "")
    major, minor = stats.get("compute_cap_major"), stats.get("compute_cap_minor")
    cc = f"{major}.{minor}" if major is not None else ""
    cores = int_stat(stats["core_count"], "core_count") if stats.get("core_count") else None
    clock = float(stats["clock_rate"]) / 1000 if stats.get("clock_rate") else None   # kHz -> MHz
    memory = int_stat(stats["memory_size"], "memory_size") if stats.get("memory_size") else None
    bandwidth = int_stat(stats["memory_bandwidth"], "memory_bandwidth") if stats.get("memory_bandwidth") else None
    kind = name.split(":")[1] if name.count(":") >= 2 else "device"
    text = str(stats.get("gpu_device_name") or "") or (f"{vendor} {kind}" if vendor else kind)
    parts = [text]
    if cc:
        parts.append(f"compute capability {cc}" if vendor.lower() != "amd" else f"gfx {cc}")
    if cores:
        parts.append(f"{cores} {'CUs' if vendor.lower() == 'amd' else 'SMs'}")
    if memory:
        parts.append(f"{memory / 2**30:.1f} GiB")
    peak_tflops = stats.get("peak_teraflops_per_second")
    peak_gbps = stats.get("peak_hbm_bw_gigabytes_per_second")
    return DeviceSummary(name=name, description=", ".join(parts), vendor=vendor, compute_capability=cc,
                         core_count=cores, clock_mhz=clock, memory_bytes=memory,
                         memory_bandwidth_bytes_per_s=bandwidth,
                         peak_flops_per_s=float(peak_tflops) * 1e12 if peak_tflops else None,
                         peak_bytes_per_s=float(peak_gbps) * 1e9 if peak_gbps else None)


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
