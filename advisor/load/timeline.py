"""Read the timeline of an XSpace with `jax.profiler.ProfileData`: op self times and steps.

Only the stats we need are read, and only on events that can carry them: reading every
event's stats costs several times the parse itself on large traces.
"""

from __future__ import annotations

import bisect
import dataclasses
import re
from typing import Optional

from ..model import SMALL_KERNEL_NS, AllocatorPeak, DeviceSummary, HostEvent, OpStat, Step, Transfer, merge_intervals

# Host thread lines where XLA's CPU runtime executes HLO ops.
_CPU_EXECUTOR_PREFIXES = ("tf_XLA",)
# Host lines that never carry step annotations (executors, driver callbacks, dispatch pools).
_NOT_STEP_LINES = ("tf_XLA", "Host Threads", "tf_pjrt", "py_xla", "tf_Compute",
                   "tf_PjRtCompilerThreadPool", "tf_xla-cpu-codegen")
NO_MODULE = "(no module)"     # device events that no XLA program launched (e.g. TensorFlow kernels)
_NOT_OP_EVENTS = ("end: ", "ThreadpoolListener", "ThunkExecutor", "SlinkyThreadPool")


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


# Host events that explain where a step's time goes when the device waits (see host-bound).
_SYNC_RE = re.compile(r"^\$(array\.py:\d+ (__float__|__int__|__bool__|__index__|__array__|item|tolist|_value)"
                      r"|api\.py:\d+ (block_until_ready|device_get)|builtins print)$|^np\.asarray\(jax\.Array\)$")
_COMPILE_RE = re.compile(r"^\$pxla\.py:\d+ compile$|^PjRt\w*Client::Compile$")
_TRANSFER_NAMES = ("DevicePut", "H2D Dispatch", "D2H Dispatch")
_COMPILER_LINES = ("tf_PjRtCompilerThreadPool", "tf_xla-cpu-codegen", "tf_xla-gpu", "tf_XLAGpuCompiler")


def _host_category(name: str) -> Optional[str]:
    if _COMPILE_RE.match(name):
        return "compile"
    if _SYNC_RE.match(name):
        return "sync"
    if name.startswith(_TRANSFER_NAMES) or "batched_device_put" in name:
        return "transfer"
    return None


def _stat_dict(event, wanted: frozenset) -> dict:
    if hasattr(event, "stat_dict"):   # the streaming reader reads only the wanted values
        return event.stat_dict(wanted)
    return {k: v for k, v in event.stats if k in wanted}


_OP_STATS = frozenset({"hlo_op", "hlo_module", "program_id", "run_id"})


class _OpAccumulator:
    def __init__(self):
        self.by_key: dict[tuple[str, str], list] = {}
        self.intervals: list[tuple[float, float]] = []
        self.runs: dict[tuple[str, int], list[float]] = {}   # (module, run_id) -> [start, end]
        self.device_busy: list[tuple[float, float]] = []      # GPU/TPU: kernel intervals


    def add_line(self, events: list[tuple], device: str = "") -> None:
        """events: (start, duration, module_key, op, run_id or None) on one line, sorted by start."""
        stack: list[tuple[float, int]] = []   # (end, index) of the enclosing ops
        self_ns = [0.0] * len(events)
        runs, intervals = self.runs, self.intervals
        last_run, span = None, None
        for idx, (start, dur, module, op, run_id) in enumerate(events):
            end = start + dur
            if run_id is not None:
                if (module, run_id) != last_run:
                    last_run = (module, run_id)
                    span = runs.setdefault(last_run, [start, end])
                if start < span[0]:
                    span[0] = start
                if end > span[1]:
                    span[1] = end
            while stack and stack[-1][0] <= start:
                stack.pop()
            if stack:
                self_ns[stack[-1][1]] -= dur
            self_ns[idx] += dur
            stack.append((end, idx))
            intervals.append((start, end))
        by_key = self.by_key
        for idx, (_, _, module, op, _) in enumerate(events):
            entry = by_key.get((device, module, op))
            if entry is None:
                entry = by_key[(device, module, op)] = [0.0, 0]
            entry[0] += self_ns[idx] if self_ns[idx] > 0 else 0.0
            entry[1] += 1

    def busy_spans(self) -> list[tuple[float, float]]:
        """When the device was executing: program executions on CPU, op intervals on devices."""
        if self.device_busy:
            return list(self.device_busy)
        return [tuple(span) for span in self.runs.values()] if self.runs else list(self.intervals)

    def step_module(self) -> Optional[str]:
        """The program with the most op time: the training step in a training trace."""
        totals: dict[str, float] = {}
        for (_, module, _), (self_ns, _) in self.by_key.items():
            if module != NO_MODULE:
                totals[module] = totals.get(module, 0.0) + self_ns
        return max(totals, key=totals.get) if totals else None

    def step_runs(self) -> list[tuple[float, float]]:
        """Executions (start, end) of the step program, in order."""
        top = self.step_module()
        return sorted(tuple(span) for (module, _), span in self.runs.items() if module == top)

    def stats(self) -> list[OpStat]:
        return [OpStat(module=m, name=o, self_ns=v[0], count=v[1], device=d) for (d, m, o), v in self.by_key.items()]


def read_timeline(profile_data) -> Timeline:
    acc = _OpAccumulator()
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

    backend, device_name, device_stats = "cpu", "", {}
    kernel_starts: dict[str, dict[int, float]] = {p.name: {} for p in device_planes}
    devices = [_device_plane(p, acc, transfers, kernel_starts[p.name]) for p in device_planes]
    active = [d for d in devices if d.active]
    if active:
        backend = "tpu" if active[0].name.startswith("/device:TPU") else "gpu"
        first = next(p for p in device_planes if p.name == active[0].name)
        device_stats = dict(first.stats)
        device_name = active[0].description + (f" (x{len(active)} active)" if len(active) > 1 else "")
    elif host is not None:
        for line in host.lines:
            if line.name.startswith(_CPU_EXECUTOR_PREFIXES):
                acc.add_line(_cpu_op_events(line, host_events))
        if "cpu_version" not in host_stats and not acc.by_key:
            backend = "unknown"

    steps, allocators = [], []
    if host is not None:
        launches: dict[int, float] = {}
        marks, allocators = _host_pass(host, host_events, launches if active else None)
        for d in devices:
            starts = kernel_starts[d.name]
            delays = sorted(start - launches[c] for c, start in starts.items() if c in launches)
            d.launches_matched = len(delays)
            d.launch_delay_median_ns = delays[len(delays) // 2] if delays else None
        steps = _steps(marks, acc.intervals, acc.step_runs())
    transfers.extend(_h2d_transfer(e) for e in host_events if e.category == "transfer" and e.name.startswith("H2D"))
    host_events.sort(key=lambda e: e.start_ns)
    return Timeline(backend=backend, device_name=device_name, device_stats=device_stats,
                    ops=acc.stats(), steps=steps, host_stats=host_stats, step_module=acc.step_module(), busy=merge_intervals(acc.busy_spans()),
                    host_events=host_events, transfers=sorted(transfers, key=lambda t: t.start_ns),
                    devices=devices, allocators=allocators)


def _h2d_transfer(event: HostEvent) -> Transfer:
    """A host-side H2D dispatch (CPU backend): the trace records no size for it."""
    return Transfer(kind="H2D", start_ns=event.start_ns, duration_ns=event.duration_ns, bytes=None, device="cpu")


_ALLOC_EVENTS = ("MemoryAllocation", "MemoryDeallocation")
_ALLOC_STATS = frozenset({"allocator_name", "bytes_allocated", "peak_bytes_in_use"})


def _host_pass(host, host_events: list[HostEvent], launches: Optional[dict[int, float]] = None):
    """Step marks; compile / sync / transfer events; allocator peaks from memory events;
    on GPU traces (launches given) the host launch time of each CUPTI correlation id."""
    marks = []
    categories: dict[str, Optional[str]] = {}
    alloc: dict[str, list[int]] = {}    # allocator -> [peak allocated, lifetime peak, events]
    for line in host.lines:
        line_name = line.name
        if line_name.startswith("Host Threads") and launches is not None:
            for ev in line.events:
                for key, value in ev.stats:
                    if key == "correlation_id":
                        launches[int(value)] = ev.start_ns
                        break
            continue
        if line_name.startswith(_CPU_EXECUTOR_PREFIXES) or line_name.startswith("Host Threads"):
            continue
        step_line = not line_name.startswith(_NOT_STEP_LINES)
        for ev in line.events:
            name = ev.name
            cat = categories.get(name, "?")
            if cat == "?":
                cat = categories[name] = _host_category(name)
            if cat is not None:
                host_events.append(HostEvent(name, ev.start_ns, ev.duration_ns, cat))
                continue
            if name in _ALLOC_EVENTS:
                stats = _stat_dict(ev, _ALLOC_STATS)
                entry = alloc.setdefault(str(stats.get("allocator_name", "?")), [0, 0, 0])
                entry[0] = max(entry[0], int(stats.get("bytes_allocated", 0) or 0))
                entry[1] = max(entry[1], int(stats.get("peak_bytes_in_use", 0) or 0))
                entry[2] += 1
                continue
            if not step_line or name.startswith("$"):
                continue
            for key, value in ev.stats:
                if key == "step_num":
                    marks.append((ev.start_ns, ev.start_ns + ev.duration_ns, int(value)))
                    break
    marks.sort()
    allocators = [AllocatorPeak(a, v[0], v[1], v[2]) for a, v in sorted(alloc.items())]
    return marks, allocators


def _module_key(stats: dict) -> str:
    return f"{stats.get('hlo_module', '?')}({stats.get('program_id', -1)})"


def _cpu_op_events(line, host_events: list[HostEvent]) -> list[tuple]:
    """Op events of one XLA CPU executor thread.

    Every op runs inside a `ThunkExecutor::Execute` span of one program execution, so the
    stats (module, program, run) are read once per span, not once per op: on large traces
    reading every op's stats costs several times the parse.
    """
    out = []
    append = out.append
    kinds: dict[str, int] = {}      # event name -> 0 op, 1 span start, 2 other
    span_end, span = -1.0, None     # span: (module_key, run_id) of the current Execute span
    for ev in line.events:
        name = ev.name
        kind = kinds.get(name)
        if kind is None:
            kind = kinds[name] = (1 if name.startswith("ThunkExecutor::Execute") and not name.endswith(")")
                                  else 2 if name.startswith(_NOT_OP_EVENTS)
                                  else 3 if name.startswith(_TRANSFER_NAMES) else 0)
        if kind == 2:
            continue
        if kind == 3:
            host_events.append(HostEvent(name, ev.start_ns, ev.duration_ns, "transfer"))
            continue
        start = ev.start_ns
        if kind == 1:
            span_end, span = start + ev.duration_ns, None
            continue
        if span is None or start >= span_end:
            stats = _stat_dict(ev, _OP_STATS)
            if "hlo_op" not in stats:
                continue
            here = (_module_key(stats), stats.get("run_id"))
            if start < span_end:
                span = here
        else:
            here = span
        append((start, ev.duration_ns, here[0], name, here[1]))
    out.sort(key=lambda e: e[0])
    return out


_MEMCPY_KINDS = {"MemcpyH2D": "H2D", "MemcpyD2H": "D2H", "MemcpyD2D": "D2D", "MemcpyP2P": "P2P",
                 "MemcpyOther": "Other", "CopyDeviceToDevice": "D2D", "CopyHostToDevice": "H2D",
                 "CopyDeviceToHost": "D2H"}
_DEVICE_STATS = frozenset({"hlo_op", "hlo_module", "program_id", "memcpy_details"})


_DEVICE_STATS = frozenset({"hlo_op", "hlo_module", "program_id", "memcpy_details", "kernel_details",
                           "correlation_id"})


def _device_plane(plane, acc: _OpAccumulator, transfers: list[Transfer],
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
            stats = _stat_dict(ev, _DEVICE_STATS)
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
                events.append((start, dur, NO_MODULE, ev.name, None))
            else:
                events.append((start, dur, _module_key(stats), str(op).split("::")[-1], None))
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


def _steps_from_runs(runs: list[tuple[float, float]]) -> list[Step]:
    """Without step annotations: one step per execution of the step program (CPU backend,
    where executions carry run ids), each lasting until the next one starts."""
    steps = []
    for i, (start, end) in enumerate(runs):
        stop = max(end, runs[i + 1][0]) if i + 1 < len(runs) else end
        steps.append(Step(number=i, start_ns=start, end_ns=stop, annotated=False))
    return steps


def _steps(marks, intervals: list[tuple[float, float]], runs: list[tuple[float, float]]) -> list[Step]:
    """Steps from `StepTraceAnnotation` events, as a sequence of back-to-back periods.

    When the step program ran once per annotated step, step i ends at the latest of: its
    execution's end (dispatch is asynchronous, so a step's ops may run after the next
    annotation began), its annotation's end, and the next annotation's start (host time
    between steps belongs to the step before). Otherwise each step is extended to the end
    of the ops that started inside it.
    """
    if not marks:
        return _steps_from_runs(runs)
    if len(runs) == len(marks):
        steps, begin = [], marks[0][0]
        for i, ((start, mark_end, num), (_, run_end)) in enumerate(zip(marks, runs)):
            end = max(run_end, mark_end, marks[i + 1][0] if i + 1 < len(marks) else run_end, begin)
            steps.append(Step(number=num, start_ns=begin, end_ns=end))
            begin = end
        return steps
    intervals = sorted(intervals)
    starts = [s for s, _ in intervals]
    steps = []
    for i, (start, end, num) in enumerate(marks):
        limit = marks[i + 1][0] if i + 1 < len(marks) else float("inf")
        lo, hi = bisect.bisect_left(starts, start), bisect.bisect_left(starts, limit)
        last_op_end = max((intervals[j][1] for j in range(lo, hi)), default=end)
        steps.append(Step(number=num, start_ns=start, end_ns=max(end, last_op_end)))
    return steps
