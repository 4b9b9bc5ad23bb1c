"""The host plane's threads: step marks, compile / sync / transfer events, allocator peaks, and the
XLA CPU executor threads where the CPU backend runs its ops."""

from __future__ import annotations

import re
from array import array
from typing import Optional

import numpy as np

from ..model import AllocatorPeak, HostEvent, Transfer
from .columns import chunks_of, classify
from .op_accumulator import module_key
from .op_store import BLOCK_OPS
from .xplane_stream import int_stat

# Host thread lines where XLA's CPU runtime executes HLO ops.
CPU_EXECUTOR_PREFIXES = ("tf_XLA",)
# Host lines that never carry step annotations (executors, driver callbacks, dispatch pools).
_NOT_STEP_LINES = ("tf_XLA", "Host Threads", "tf_pjrt", "py_xla", "tf_Compute",
                   "tf_PjRtCompilerThreadPool", "tf_xla-cpu-codegen")
_NOT_OP_EVENTS = ("end: ", "ThreadpoolListener", "ThunkExecutor", "SlinkyThreadPool")


# Host events that explain where a step's time goes when the device waits (see host-bound).
_SYNC_RE = re.compile(r"^\$(array\.py:\d+ (__float__|__int__|__bool__|__index__|__array__|item|tolist|_value)"
                      r"|api\.py:\d+ (block_until_ready|device_get)|builtins print)$|^np\.asarray\(jax\.Array\)$")
_COMPILE_RE = re.compile(r"^\$pxla\.py:\d+ compile$|^PjRt\w*Client::Compile$")
_TRANSFER_NAMES = ("DevicePut", "H2D Dispatch", "D2H Dispatch")
_COMPILER_LINES = ("tf_PjRtCompilerThreadPool", "tf_xla-cpu-codegen", "tf_xla-gpu", "tf_XLAGpuCompiler")


TOOL_WAIT = "advisor: waits for the device work"     # advisor.trace's own waits (api.Trace), not the program's


def _host_category(name: str) -> Optional[str]:
    if name.startswith(TOOL_WAIT):
        return "tool"
    if _COMPILE_RE.match(name):
        return "compile"
    if _SYNC_RE.match(name):
        return "sync"
    if name.startswith(_TRANSFER_NAMES) or "batched_device_put" in name:
        return "transfer"
    return None


_OP_STATS = frozenset({"hlo_op", "hlo_module", "program_id", "run_id", "device_ordinal"})
# XLA's CPU collectives: the rendezvous of the participants (not ops), and the wait for peers inside it.
_RENDEZVOUS = ("Rendezvous", "Wait for rendezvous callback", "InvokeRendezvous")
_PEER_WAIT = ("Wait: pending_threads",)


def h2d_transfer(event: HostEvent) -> Transfer:
    """A host-side H2D dispatch (CPU backend): the trace records no size for it."""
    return Transfer(kind="H2D", start_ns=event.start_ns, duration_ns=event.duration_ns, bytes=None, device="cpu")


_ALLOC_EVENTS = ("MemoryAllocation", "MemoryDeallocation")
_ALLOC_STATS = frozenset({"allocator_name", "bytes_allocated", "peak_bytes_in_use"})


_CAT_CODES = {None: 0, "compile": 1, "sync": 2, "transfer": 3, "tool": 4}
_CATS = {v: k for k, v in _CAT_CODES.items()}
_ALLOC, _STEP_MARK = 5, 6      # host event codes beside the categories: allocator event, maybe a step mark


def _host_code(name: str) -> int:
    cat = _host_category(name)
    if cat is not None:
        return _CAT_CODES[cat]
    if name in _ALLOC_EVENTS:
        return _ALLOC
    return 0 if name.startswith("$") else _STEP_MARK


class Launches:
    """The host launch time of each CUPTI correlation id, as two growing arrays (a GPU trace has
    one launch per kernel: millions of them)."""

    def __init__(self):
        self.ids, self.starts, self.durs = array("q"), array("d"), array("d")

    def add(self, correlation_id: int, start: float, dur: float = 0.0) -> None:
        if 0 <= correlation_id < 1 << 63:       # a uint32 widened; anything else is damage
            self.ids.append(correlation_id)
            self.starts.append(start)
            self.durs.append(dur)

    def launched_at(self, ids: np.ndarray) -> np.ndarray:
        """The host launch time of each id (its last launch; NaN where none was seen)."""
        known = np.frombuffer(self.ids, dtype=np.int64)[::-1] if len(self.ids) else np.empty(0, dtype=np.int64)
        out = np.full(len(ids), np.nan)
        if not len(known) or not len(ids):
            return out
        known, last = np.unique(known, return_index=True)
        launched = np.frombuffer(self.starts, dtype=np.float64)[::-1][last]
        at = np.minimum(np.searchsorted(known, ids), len(known) - 1)
        found = known[at] == ids
        out[found] = launched[at[found]]
        return out

    def split(self, ids: np.ndarray, starts: np.ndarray, busy_starts: np.ndarray,
              busy_ends: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The launch-to-start delays (ns, sorted) of the kernels (ids, starts) whose launch was seen,
        apart: (queued: launched before the device work ahead of the kernel had ended, so it waited
        for that work and the delay is the host running ahead; idle: launched after the device had
        finished all work ahead of it, so the delay is the launch's own overhead; the host-side
        duration of the launch calls). busy: the device's merged busy spans (starts, ends)."""
        known = np.frombuffer(self.ids, dtype=np.int64)[::-1] if len(self.ids) else np.empty(0, dtype=np.int64)
        if not len(known) or not len(ids):
            return np.empty(0), np.empty(0), np.empty(0)
        known, last = np.unique(known, return_index=True)
        launched = np.frombuffer(self.starts, dtype=np.float64)[::-1][last]
        durs = np.frombuffer(self.durs, dtype=np.float64)[::-1][last]
        at = np.minimum(np.searchsorted(known, ids), len(known) - 1)
        found = known[at] == ids
        t, start = launched[at[found]], starts[found]
        delay = start - t
        # the end of the device work ahead of each kernel: the busy span before the kernel's own, or the
        # kernel's start where it starts inside a span (work on the device right up to it)
        ahead = np.full(len(start), -np.inf)
        if len(busy_starts):
            span = np.searchsorted(busy_starts, start, side="right") - 1
            inside = (span >= 0) & (busy_starts[np.maximum(span, 0)] < start)
            before = ~inside & (span >= 1)
            ahead[inside] = start[inside]
            ahead[before] = busy_ends[span[before] - 1]
        queued = t < ahead
        return np.sort(delay[queued]), np.sort(delay[~queued]), np.sort(durs[at[found]])


def host_pass(host, host_events: list[HostEvent], launches: Optional[Launches] = None,
              alloc_events: Optional["AllocatorEvents"] = None):
    """Step marks and allocator peaks; compile / sync / transfer events into host_events; on GPU
    traces (launches given) the host launch time of each CUPTI correlation id; each allocator
    memory event (start, allocator, bytes allocated, peak in use) into alloc_events if given
    (for peaks over a window of steps).
    Each event's kind is decided once per event name: only the events of a kind are visited."""
    marks = []
    codes: dict[int, int] = {}
    plane_ids: dict[str, int] = {}
    alloc: dict[str, list[int]] = {}    # allocator -> [peak allocated, lifetime peak, events]
    for line in host.lines:
        line_name = line.name
        if line_name.startswith("Host Threads") and launches is not None:
            for chunk in chunks_of(line, plane_ids, all_stats=True):
                starts = chunk.start_ns.tolist()
                for i in range(len(chunk)):
                    for key, value in chunk.stat_items(i):
                        if key == "correlation_id":
                            launches.add(int(value), starts[i], float(chunk.dur_ns[i]))
                            break
            continue
        if line_name.startswith(CPU_EXECUTOR_PREFIXES) or line_name.startswith("Host Threads"):
            continue
        step_line = not line_name.startswith(_NOT_STEP_LINES)
        # today's CUPTI merges its launch events (named after the kernel, `cuGraphLaunch (CudaGraph:N)`,
        # `Memset`...) into the thread line that launched them: their correlation ids are read there too
        with_launches = launches is not None
        for chunk in chunks_of(line, plane_ids, all_stats=step_line or with_launches):
            kind = classify(chunk, _host_code, codes)
            wanted = np.nonzero((kind != 0) & ((kind != _STEP_MARK) | step_line | with_launches))[0]
            if not len(wanted):
                continue
            starts, durs, ids, names = chunk.start_ns, chunk.dur_ns, chunk.ids, chunk.names
            for i in wanted.tolist():
                code = int(kind[i])
                start = float(starts[i])
                if code < _ALLOC:
                    host_events.append(HostEvent(names.get(int(ids[i]), ""), start, float(durs[i]), _CATS[code]))
                elif code == _ALLOC:
                    stats = chunk.stats(i, _ALLOC_STATS)
                    event = (start, str(stats.get("allocator_name", "?")),
                             int_stat(stats.get("bytes_allocated"), "bytes_allocated"),
                             int_stat(stats.get("peak_bytes_in_use"), "peak_bytes_in_use"))
                    _fold(alloc, event)
                    if alloc_events is not None:
                        alloc_events.append(event)
                else:
                    for key, value in chunk.stat_items(i):
                        if key == "step_num" and step_line:
                            marks.append((start, start + float(durs[i]), int(value)))
                            break
                        if key == "correlation_id" and with_launches:
                            launches.add(int_stat(value, "correlation_id", -1), start, float(durs[i]))
                            break
    marks.sort()
    return marks, alloc


def _fold(alloc: dict[str, list[int]], event: tuple[float, str, int, int]) -> None:
    _, name, allocated, peak = event
    entry = alloc.setdefault(name, [0, 0, 0])
    entry[0] = max(entry[0], allocated)
    entry[1] = max(entry[1], peak)
    entry[2] += 1


_INT64_MAX = (1 << 63) - 1


class AllocatorEvents:
    """Allocator memory events (start, allocator, bytes allocated, peak in use) as arrays, kept
    to take the peaks over a window of steps once it is known."""

    def __init__(self):
        self.names: dict[str, int] = {}
        self.starts, self.which, self.allocated, self.peak = array("d"), array("q"), array("q"), array("q")

    def append(self, event: tuple[float, str, int, int]) -> None:
        start, name, allocated, peak = event
        self.starts.append(start)
        self.which.append(self.names.setdefault(name, len(self.names)))
        self.allocated.append(min(max(allocated, 0), _INT64_MAX))     # bytes: a damaged file may say anything
        self.peak.append(min(max(peak, 0), _INT64_MAX))

    def fold(self, window: tuple[float, float]) -> dict[str, list[int]]:
        """alloc as host_pass folds it, over the events that start inside window."""
        if not len(self.starts):
            return {}
        starts = np.frombuffer(self.starts, dtype=np.float64)
        inside = (starts >= window[0]) & (starts < window[1])
        which = np.frombuffer(self.which, dtype=np.int64)
        allocated, peak = np.frombuffer(self.allocated, dtype=np.int64), np.frombuffer(self.peak, dtype=np.int64)
        out = {}
        for name, i in self.names.items():
            mine = inside & (which == i)
            if mine.any():
                out[name] = [int(allocated[mine].max()), int(peak[mine].max()), int(mine.sum())]
        return out


def allocator_peaks(alloc: dict[str, list[int]], events: Optional[AllocatorEvents] = None,
                    window=None) -> list[AllocatorPeak]:
    """Each allocator's peaks: over the trace (alloc, as host_pass folded it), or over the memory
    events that start inside window."""
    if window is not None:
        alloc = events.fold(window) if events is not None else {}
    return [AllocatorPeak(a, v[0], v[1], v[2]) for a, v in sorted(alloc.items())]


_OP, _SPAN, _OTHER, _XFER, _RENDEZVOUS_EV, _WAIT = range(6)


def _cpu_kind(name: str) -> int:
    return (_SPAN if name.startswith("ThunkExecutor::Execute") and not name.endswith(")")
            else _OTHER if name.startswith(_NOT_OP_EVENTS)
            else _XFER if name.startswith(_TRANSFER_NAMES)
            else _WAIT if name.startswith(_PEER_WAIT)
            else _RENDEZVOUS_EV if name.startswith(_RENDEZVOUS) else _OP)


class _SpanState:
    """Where a CPU executor thread is, carried from one chunk of its events to the next."""
    __slots__ = ("span_end", "span", "here")

    def __init__(self):
        self.span_end, self.span, self.here = -1.0, -1, -1    # span, here: place ids (-1: none)


def cpu_op_line(line, acc, host_events: list[HostEvent], plane_ids: dict[str, int], caches: dict) -> None:
    """The op events of one XLA CPU executor thread into `acc`, each with the device that ran it.

    Every op runs inside a `ThunkExecutor::Execute` span of one program execution on one
    device, so the stats (module, program, run, device ordinal) are read once per outermost span
    (spans nested in it, such as a loop body's, are the same execution), from its first op that
    has them, not once per op: on large traces reading every op's stats costs several times the
    parse. The threads serve every simulated device in turn: the
    `device_ordinal` stat says which. Inside a collective, XLA's rendezvous records
    `Wait: pending_threads=k/N` while the device waits for its peers to arrive: those spans go
    to `acc.add_waits`, with the place of the op they wait in.
    """
    kinds_cache = caches.setdefault("cpu_kind", {})
    name_cache = caches.setdefault("name_id", {})
    state = _SpanState()
    ops_line = acc.line()
    waits = []
    for chunk in chunks_of(line, plane_ids):
        kind = classify(chunk, _cpu_kind, kinds_cache)
        names = chunk.names
        for i in np.nonzero(kind == _XFER)[0].tolist():
            host_events.append(HostEvent(names.get(int(chunk.ids[i]), ""), float(chunk.start_ns[i]),
                                         float(chunk.dur_ns[i]), "transfer"))
        sel = np.nonzero((kind == _OP) | (kind == _SPAN) | (kind == _WAIT))[0]
        if not len(sel):
            continue
        places = _places(chunk, sel, kind[sel], state, acc)
        ops = sel[places >= 0]
        if len(ops):
            name_ids = classify(chunk, acc.name_id, name_cache)
            ops_line.add(chunk.start_ns[ops], chunk.dur_ns[ops], places[places >= 0], name_ids[ops])
        at, where = _waits(sel, kind[sel], places, state)
        if len(at):
            waits.append((chunk.start_ns[at], chunk.dur_ns[at], where))
            if sum(len(w[0]) for w in waits) >= BLOCK_OPS:
                acc.add_waits(*(np.concatenate([w[k] for w in waits]) for k in range(3)))
                waits = []
        last_kept = np.nonzero(places >= 0)[0]
        if len(last_kept):
            state.here = int(places[last_kept[-1]])
    if waits:
        acc.add_waits(*(np.concatenate([w[k] for w in waits]) for k in range(3)))
    ops_line.close()


def _places(chunk, sel: np.ndarray, kind: np.ndarray, state: _SpanState, acc) -> np.ndarray:
    """The place (module, run, device) of each selected event that is a kept op, else -1."""
    m = len(sel)
    starts = chunk.start_ns[sel]
    span_ends = starts + chunk.dur_ns[sel]
    # Only outermost spans count: a span nested in another (a loop body's executor inside its
    # program's) belongs to the same execution, so its ops need no stats of their own.
    is_span = kind == _SPAN
    at = np.nonzero(is_span)[0]
    if len(at):
        reach = np.maximum.accumulate(np.concatenate([[state.span_end], span_ends[at]]))[:-1]
        is_span[at[starts[at] < reach]] = False
    seg = np.maximum.accumulate(np.where(is_span, np.arange(m), -1))
    end_of = np.where(seg >= 0, span_ends[np.maximum(seg, 0)], state.span_end)
    is_op = kind == _OP
    inside = is_op & (starts < end_of)
    out = np.full(m, -1, dtype=np.int64)
    inside_at = np.nonzero(inside)[0]
    current = state.span
    if len(inside_at):
        segs = seg[inside_at]
        bounds = np.nonzero(np.diff(segs))[0] + 1
        for g0, g1 in zip([0, *bounds.tolist()], [*bounds.tolist(), len(segs)]):
            value = state.span if segs[g0] == -1 else -1
            first = g0
            while value < 0 and first < g1:
                value = _read_place(chunk, int(sel[inside_at[first]]), acc)
                if value < 0:
                    first += 1
            if value >= 0:
                out[inside_at[first:g1]] = value
            current = value
    if is_span.any():
        last_span = int(np.nonzero(is_span)[0][-1])
        state.span_end = float(span_ends[last_span])
        # a span with no op inside it in this chunk: its first op may come in the next chunk
        state.span = current if len(inside_at) and seg[inside_at[-1]] == last_span else -1
    else:
        state.span = current
    for j in np.nonzero(is_op & ~inside)[0].tolist():      # ops outside any span: their own stats
        out[j] = _read_place(chunk, int(sel[j]), acc)
    return out


def _read_place(chunk, i: int, acc) -> int:
    stats = chunk.stats(i, _OP_STATS)
    if "hlo_op" not in stats:
        return -1
    return acc.place_id(module_key(stats), stats.get("run_id"),
                        f"cpu:{int_stat(stats.get('device_ordinal'), 'device_ordinal')}")



def _waits(sel: np.ndarray, kind: np.ndarray, places: np.ndarray, state: _SpanState):
    """(event indices, places) of the waits for peers: each in the place of the last kept op
    before it (or the chunk before's)."""
    at = np.nonzero(kind == _WAIT)[0]
    if not len(at):
        return at, at
    last = np.maximum.accumulate(np.where(places >= 0, np.arange(len(sel)), -1))[at]
    where = np.where(last >= 0, places[np.maximum(last, 0)], state.here)
    keep = where >= 0
    return sel[at[keep]], where[keep]
