"""GPU and TPU device planes: kernels and copies, op self times, device facts."""

from __future__ import annotations

from typing import Optional

from ..model import SMALL_KERNEL_NS, DeviceSummary, Transfer, merge_intervals
from .ops import NO_MODULE, OpAccumulator, module_key, stat_dict

_MEMCPY_KINDS = {"MemcpyH2D": "H2D", "MemcpyD2H": "D2H", "MemcpyD2D": "D2D", "MemcpyP2P": "P2P",
                 "MemcpyOther": "Other", "CopyDeviceToDevice": "D2D", "CopyHostToDevice": "H2D",
                 "CopyDeviceToHost": "D2H"}
_DEVICE_STATS = frozenset({"hlo_op", "hlo_module", "program_id", "memcpy_details", "kernel_details",
                           "correlation_id"})


def device_plane(plane, acc: OpAccumulator, transfers: list[Transfer],
                 kernel_starts: dict[int, float]) -> DeviceSummary:
    """Kernels and copies of one GPU (or TPU) plane: op self times, counts, busy intervals.

    kernel_starts collects each kernel's start by CUPTI correlation id, to join host launches.
    """
    summary = _describe(plane.name, dict(plane.stats))
    tpu = plane.name.startswith("/device:TPU")
    spans = []
    for line in plane.lines:
        if not (line.name.startswith("Stream") or tpu):
            continue   # derived lines (XLA Ops, Steps, ...) repeat the stream events
        events = []
        for ev in line.events:
            stats = stat_dict(ev, _DEVICE_STATS)
            start, dur = ev.start_ns, ev.duration_ns
            kind = _MEMCPY_KINDS.get(ev.name)
            details = stats.get("memcpy_details")
            if kind or details:
                transfers.append(Transfer(kind=kind or _memcpy_kind(str(details)), start_ns=start,
                                          duration_ns=dur, bytes=_memcpy_bytes(details), device=plane.name))
                summary.memcpy_count += 1
                summary.memcpy_ns += dur
            else:
                spans.append((start, start + dur))   # computing; a copy engine alone is not
            if not (kind or details) and stats.get("kernel_details"):
                if "correlation_id" in stats:
                    kernel_starts[int(stats["correlation_id"])] = start
                summary.kernel_count += 1
                summary.kernel_ns += dur
                if dur < SMALL_KERNEL_NS:
                    summary.small_kernel_count += 1
                    summary.small_kernel_ns += dur
            op = stats.get("hlo_op")
            if op is None:
                events.append((start, dur, NO_MODULE, ev.name, None, plane.name))
            else:
                events.append((start, dur, module_key(stats), str(op).split("::")[-1], None, plane.name))
        events.sort(key=lambda e: e[0])
        acc.add_line(events, plane.name)
    summary.busy = merge_intervals(spans)
    acc.device_busy.extend(summary.busy)
    return summary


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
