"""GPU and TPU device planes: kernels and copies, op self times, device facts."""

from __future__ import annotations

import dataclasses
import re
from typing import Optional

import numpy as np

from ..model import KERNEL_BUCKETS_NS, DeviceSummary, Transfer
from .columns import as_spans, chunks_of, merged
from .command_buffers import COMMAND_BUFFER_OP, Launch, Schedule, launch
from .op_accumulator import NO_MODULE, OpAccumulator, module_key
from .xplane_stream import int_stat

_MEMCPY_KINDS = {"MemcpyH2D": "H2D", "MemcpyD2H": "D2H", "MemcpyD2D": "D2D", "MemcpyP2P": "P2P",
                 "MemcpyOther": "Other", "CopyDeviceToDevice": "D2D", "CopyHostToDevice": "H2D",
                 "CopyDeviceToHost": "D2H"}
# the driver's kernels, not XLA's
_DRIVER_KERNEL = re.compile(r"(Memset|memcpy\d*(_(pre|post))?$|__amd_rocclr_(fill|copy)Buffer)")
_DEVICE_STATS = frozenset({"hlo_op", "hlo_module", "program_id", "memcpy_details", "kernel_details",
                           "correlation_id", "scope_range_id", "Memset_details"})


class PlaneEvents:
    """What one GPU/TPU plane recorded, kept until the window of steps is known, as columns (one
    array per chunk read): each event's start and duration, whether it is a copy or a kernel, its
    CUPTI correlation id (-1: none), and the copies as Transfers."""

    def __init__(self, summary: DeviceSummary):
        self.summary = summary        # the plane's description; counts and busy filled by summarize
        self._pieces: list[tuple[np.ndarray, ...]] = []     # (start, duration, is copy, is kernel, correlation id)
        self.transfers: list[Transfer] = []
        self.graphs = GraphCounts()       # the kernels of command buffers

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
        bucket = np.searchsorted(np.array(KERNEL_BUCKETS_NS), durs[kernel], side="right")
        kernel_durs = durs[kernel]
        summary.kernel_counts = np.bincount(bucket, minlength=len(KERNEL_BUCKETS_NS) + 1).tolist()
        summary.kernel_bucket_ns = [_sum(kernel_durs[bucket == i]) for i in range(len(KERNEL_BUCKETS_NS) + 1)]
        compute = ~copy
        summary.busy = as_spans(*merged(starts[compute], starts[compute] + durs[compute]))
        return summary

    def launch_spans(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(correlation id, first start, last end) of the kernels of each launch (a graph's launch
        runs many kernels under one id), over the whole trace."""
        starts, durs, _, kernel, correlation = self._columns(None)
        has = kernel & (correlation >= 0)
        if not has.any():
            return np.empty(0, dtype=np.int64), np.empty(0), np.empty(0)
        ids, inverse = np.unique(correlation[has], return_inverse=True)
        first = np.full(len(ids), np.inf)
        last = np.full(len(ids), -np.inf)
        np.minimum.at(first, inverse, starts[has])
        np.maximum.at(last, inverse, starts[has] + durs[has])
        return ids, first, last

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


def device_plane(plane, acc: OpAccumulator, programs: Optional["Programs"] = None) -> PlaneEvents:
    """Kernels and copies of one GPU (or TPU) plane: ops into acc, the rest into PlaneEvents.
    Each event's stats are read (a kernel's op and correlation id are its own), but what is kept
    is columns, a chunk at a time. The kernels of command buffers are put on their instructions
    with the programs' schedules (`programs`; without it they keep the buffer's name)."""
    record = PlaneEvents(_describe(plane.name, dict(plane.stats)))
    tpu = plane.name.startswith("/device:TPU")
    plane_ids: dict[str, int] = {}
    for line in plane.lines:
        if not (line.name.startswith("Stream") or tpu):
            continue   # derived lines (XLA Ops, Steps, ...) repeat the stream events
        out = StreamOps(acc, plane.name, programs, record.graphs, merge_executions=not tpu)
        for chunk in chunks_of(line, plane_ids, all_stats=True):
            n = len(chunk)
            copy, kernel = np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
            correlation = np.full(n, -1, dtype=np.int64)
            for i, (start, dur, meta) in enumerate(zip(chunk.start_ns.tolist(), chunk.dur_ns.tolist(),
                                                       chunk.ids.tolist())):
                name = chunk.names.get(meta, "")
                stats = chunk.stats(i, _DEVICE_STATS)
                kind = _MEMCPY_KINDS.get(name)
                details = stats.get("memcpy_details")
                corr = int_stat(stats.get("correlation_id"), "correlation_id", -1)
                if kind or details:
                    record.transfers.append(Transfer(kind=kind or _memcpy_kind(str(details)), start_ns=start,
                                                     duration_ns=dur, bytes=_memcpy_bytes(details),
                                                     device=plane.name))
                    copy[i] = True
                elif stats.get("kernel_details"):
                    kernel[i] = True
                    if 0 <= corr < 1 << 63:          # a uint32 widened; anything else is damage
                        correlation[i] = corr
                op = stats.get("hlo_op")
                if op is None:
                    out.add(start, dur, NO_MODULE, name, None)
                    continue
                module = module_key(stats)
                op = str(op).split("::")[-1]
                if COMMAND_BUFFER_OP.match(op):
                    out.add_graph_kernel(start, dur, module, op, corr,
                                         launch(name, "Memset_details" in stats, bool(kind or details)))
                else:
                    out.add(start, dur, module, op, stats.get("scope_range_id"), name,
                            "Memset_details" in stats or bool(kind or details)
                            or _DRIVER_KERNEL.match(name) is not None)
            record.add(chunk.start_ns, chunk.dur_ns, copy, kernel, correlation)
            out.flush()
        out.close()
    return record


class Programs:
    """The schedules of the trace's programs, parsed once each when a command buffer of theirs is
    first read (`protos(keys)` gives the serialized HloProto of each `name(program_id)` asked)."""

    def __init__(self, protos):
        self._protos = protos
        self._schedules: dict[str, Optional[Schedule]] = {}
        self.missing: dict[str, str] = {}      # module -> why its kernels cannot be attributed

    def schedule(self, module: str) -> Optional[Schedule]:
        if module not in self._schedules:
            schedule = None
            try:
                data = self._protos({module}).get(module)
            except (ValueError, IndexError):      # a damaged metadata plane: no HLO to attribute with
                data = None
            if data is None:
                self.missing[module] = "the trace holds no HLO for this program"
            else:
                try:
                    schedule = Schedule(data)
                except Exception:  # noqa: BLE001 - protobuf's DecodeError and damage inside it
                    self.missing[module] = "its HLO cannot be parsed"
                if schedule is not None and not schedule.computations:
                    self.missing[module] = "its HLO carries no schedule"
                    schedule = None
            self._schedules[module] = schedule
        return self._schedules[module]


@dataclasses.dataclass
class GraphCounts:
    """What the kernels of command buffers on one plane came to (over the whole trace)."""
    launches: int = 0
    kernels: int = 0            # attributed to their instructions
    unattributed: int = 0
    unattributed_ns: float = 0.0
    why: dict[str, int] = dataclasses.field(default_factory=dict)     # reason -> kernels


_CONTINUED = "(continued)"     # the run id of the events after an execution's first: not counted again


class StreamOps:
    """One stream's op events on their way to the accumulator. A command buffer's launch is held
    until its last kernel is read (the next event is not its), then its kernels get the
    instructions they ran. An op's executions are counted once per execution, not per event: the
    events of one thunk (a library call's memset and kernels, under one scope range id or, in
    a launch, on one instruction) count once."""

    def __init__(self, acc: OpAccumulator, device: str, programs: Optional[Programs], graphs: GraphCounts,
                 merge_executions: bool = True):
        self.acc, self.device, self.programs, self.graphs = acc, device, programs, graphs
        self.line = acc.line(device, flat=merge_executions)     # GPU streams: kernels never nest
        self.merge = merge_executions
        self.starts: list[float] = []
        self.durs: list[float] = []
        self.modules: list[str] = []
        self.names: list[Optional[str]] = []
        self.scopes: list = []
        self.launch: Optional[tuple[str, int, str]] = None     # (module, correlation id, buffer) of the open launch
        self.launch_first = 0
        self.launch_events: list[Launch] = []
        self.previous: Optional[tuple] = None    # (module, op, scope) of the last event flushed
        self._last: Optional[tuple] = None       # (module, op, kernel, ancillary) of the last event without scope id
        self._executions = 0

    def add(self, start: float, dur: float, module: str, op: str, scope, kernel: str = "",
            ancillary: bool = False) -> None:
        """An event launched on its own. Its execution: the thunk's scope range id where the trace
        has one; else (older traces) it continues the previous event's when that ran the same op and
        one of the two is a driver memset or copy, or their kernels differ (a library call's
        kernels), and starts a new one when the same kernel runs again (the op called again)."""
        if self.launch is not None:
            self._resolve()
        if scope is None:
            last = self._last
            if not (last and last[0] == module and last[1] == op and (ancillary or last[3] or kernel != last[2])):
                self._executions += 1
            self._last = (module, op, kernel, ancillary)
            scope = self._executions
        self._append(start, dur, module, op, ("scope", scope))

    def add_graph_kernel(self, start: float, dur: float, module: str, op: str, correlation: int,
                         launch: Launch) -> None:
        schedule = self.programs.schedule(module) if self.programs is not None else None
        if schedule is None:
            if self.launch is not None:
                self._resolve()
            reason = self.programs.missing.get(module, "no HLO was read") if self.programs else "no HLO was read"
            self._unattributed(dur, f"{reason} ({module})")
            self._append(start, dur, module, op, ("launch", correlation))
            return
        key = (module, correlation, op)
        if self.launch is not None and self.launch != key:
            self._resolve()
        if self.launch is None:
            self.launch, self.launch_first, self.launch_events = key, len(self.starts), []
            self.graphs.launches += 1
        self.launch_events.append(launch)
        self._append(start, dur, module, None, ("launch", correlation))

    def _append(self, start, dur, module, op, scope) -> None:
        self.starts.append(start)
        self.durs.append(dur)
        self.modules.append(module)
        self.names.append(op)
        self.scopes.append(scope)

    def _unattributed(self, dur: float, why: str) -> None:
        self.graphs.unattributed += 1
        self.graphs.unattributed_ns += dur
        self.graphs.why[why] = self.graphs.why.get(why, 0) + 1

    def _resolve(self) -> None:
        module, _, buffer = self.launch
        names, _ = self.programs.schedule(module).attribute(self.launch_events)
        for k, name in enumerate(names):
            at = self.launch_first + k
            if name is None:
                self._unattributed(self.durs[at], "no instruction of the program's schedule matches them in order")
                name = buffer
            else:
                self.graphs.kernels += 1
            self.names[at] = name
        self.launch = None
        self.launch_events = []

    def flush(self) -> None:
        """Send the events read so far to the accumulator, but those of a launch still open."""
        upto = self.launch_first if self.launch is not None else len(self.starts)
        if not upto:
            return
        acc, device = self.acc, self.device
        places = np.empty(upto, dtype=np.int64)
        names = np.empty(upto, dtype=np.int64)
        previous = self.previous
        for i in range(upto):
            module, name, scope = self.modules[i], self.names[i], self.scopes[i]
            key = (module, name, scope)
            again = self.merge and key == previous and module != NO_MODULE
            places[i] = acc.place_id(module, _CONTINUED if again else None, device)
            names[i] = acc.name_id(name)
            previous = key
        self.previous = previous
        self.line.add(np.array(self.starts[:upto], dtype=np.float64), np.array(self.durs[:upto], dtype=np.float64),
                      places, names)
        for column in (self.starts, self.durs, self.modules, self.names, self.scopes):
            del column[:upto]
        self.launch_first -= upto

    def close(self) -> None:
        if self.launch is not None:
            self._resolve()
        self.flush()
        self.line.close()


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
