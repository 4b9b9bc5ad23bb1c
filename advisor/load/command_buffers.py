"""Which HLO instruction each kernel of an XLA command buffer (a CUDA graph) ran.

On GPU, XLA launches runs of thunks as CUDA graphs ("command buffers", on by default). CUPTI
records every kernel of a graph with the annotation of the graph's launch, so each carries
`hlo_op = command_buffer_N`, a name that is in no HLO module: by that stat alone every kernel is
"other" and no op has a time, a FLOP count or a bound (xprof 2.24 shows such a trace as idle).

The kernels can be put back on their instructions. A graph runs a stretch of one computation's
schedule (the entry computation or a loop body) between thunks it cannot hold (loops), and its
kernels run in schedule order on one stream. So the kernels of one launch (one correlation id),
in time order, are aligned against the instructions of the computation that launch work, in
schedule order:
- a kernel XLA emitted carries its fusion's name with `.` as `_` (`loop_add_fusion_3`), or the
  name of an identical fusion whose kernel XLA reused (same fused computation);
- a library kernel (cuBLAS `nvjet_*`, `sm90_xmma_gemm_*`, cuDNN, NCCL) belongs to a custom call
  (one call may launch several), and a driver `Memset` to the call that follows it;
- a driver copy kernel (`memcpy32_post`, `memcpy128`) or a `Memcpy*` event to a `copy`, or to a
  fusion XLA runs as a copy (an in-place dynamic-update-slice, started async or not).
The alignment is the best-scoring in-order matching of the launch's kernels to a stretch of one
computation (dynamic programming, as in sequence alignment): an exact name scores most, a reused
kernel of an identical fusion less, a library or copy kernel on an instruction of its kind less,
and an instruction skipped or a kernel left over costs. A kernel nothing matches stays
unattributed, counted and reported with the reason.
"""

from __future__ import annotations

import functools
import re
from typing import NamedTuple, Optional

from .hlo_proto import HloProto

COMMAND_BUFFER_OP = re.compile(r"command_buffer(_\d+)?$")
_MEMCPY_KERNEL = re.compile(r"memcpy\d*(_(pre|post))?$")      # the driver's copy kernels inside graphs
_COPY_EVENTS = ("MemcpyD2D", "MemcpyOther", "MemcpyP2P", "CopyDeviceToDevice")
# Instructions that launch nothing on the device.
_SILENT = frozenset({"parameter", "constant", "get-tuple-element", "tuple", "bitcast", "after-all", "opt-barrier",
                     "domain", "add-dependency", "async-done", "async-update", "copy-done", "all-reduce-done",
                     "all-gather-done", "collective-permute-done", "send-done", "recv-done", "partition-id",
                     "replica-id", "get-dimension-size", "set-dimension-size"})
# Instructions a command buffer does not hold: a launch never spans one.
_BOUNDARY = frozenset({"while", "conditional", "call"})
_COPY_LIKE_FUSED = frozenset({"dynamic-update-slice", "dynamic-slice", "slice", "copy", "bitcast", "parameter",
                              "tuple", "get-tuple-element", "constant", "reshape"})

# scores of a kernel on an instruction (see the module docstring)
_EXACT, _REUSED, _KIND, _WEAK = 4.0, 3.0, 3.0, 1.0
_EXTRA_KERNEL = 2.0        # another kernel of the same library call
_SKIP = 0.5                # an instruction that launches work but shows no kernel in the launch
_LEFT_OVER = 2.0           # a kernel matched to nothing


class Thunk(NamedTuple):
    """One instruction of a computation's schedule that launches device work."""
    name: str
    kind: str               # "kernel", "library" (custom calls), "copy" (copies and copy-like fusions), "boundary"
    fingerprint: object     # for fusions: what two fusions that share a kernel share (`Schedule._key`)
    gemm: bool = False      # a fusion around a dot or convolution: a library (cuBLAS, cuDNN) kernel may run it


class Launch(NamedTuple):
    """A kernel of a launch, as read: its name (as `kernel_name` spells it) and what kind of event it is."""
    name: str
    kind: str               # "memset", "copy" (driver copy kernels, Memcpy events) or "kernel"


@functools.lru_cache(maxsize=1 << 16)
def launch(name: str, is_memset: bool, is_copy: bool) -> Launch:
    """A kernel event as a launch sees it (one per distinct name: kernels repeat every step)."""
    return Launch(kernel_name(name), event_kind(name, is_memset, is_copy))


def event_kind(name: str, is_memset: bool, is_copy: bool) -> str:
    if is_memset or name.startswith("Memset"):
        return "memset"
    if is_copy or _MEMCPY_KERNEL.match(name) or name in _COPY_EVENTS:
        return "copy"
    return "kernel"


class Schedule:
    """One program's scheduled computations, as lists of the thunks that launch device work, and a
    cache of the launches already aligned (a loop body's launch repeats every iteration)."""

    def __init__(self, data: bytes):
        proto = HloProto()
        proto.ParseFromString(data)
        mod = proto.hlo_module
        comps = {c.id: c for c in mod.computations}
        self.computations: dict[str, list[Thunk]] = {}
        self.kernel_names: dict[str, Thunk] = {}     # a fusion's kernel name -> the fusion
        for entry in mod.schedule.sequences:
            comp = comps.get(entry.key)
            if comp is None:
                continue
            thunks = []
            by_id = {i.id: i for i in comp.instructions}     # a schedule names its own computation's
            for iid in entry.value.instruction_ids:
                ins = by_id.get(iid)
                if ins is None or ins.opcode in _SILENT:
                    continue
                thunk = self._thunk(ins, comps, by_id)
                thunks.append(thunk)
                self.kernel_names.setdefault(kernel_name(thunk.name), thunk)
            if any(t.kind != "boundary" for t in thunks):
                self.computations[comp.name] = thunks
        self._where: dict[str, list[tuple[str, int, int, int]]] = {}   # kernel name -> (computation, segment, its end)
        self._segments: list[tuple[str, int, int]] = []
        for comp_name, thunks in self.computations.items():
            lo = 0
            for k in range(len(thunks) + 1):     # a launch never spans a loop: the stretches between them
                if k == len(thunks) or thunks[k].kind == "boundary":
                    if k > lo:
                        self._segments.append((comp_name, lo, k))
                        for j in range(lo, k):
                            self._where.setdefault(kernel_name(thunks[j].name), []).append((comp_name, lo, k, j))
                    lo = k + 1
        self._cache: dict[tuple, tuple[list[Optional[str]], str]] = {}

    def _thunk(self, ins, comps, by_id) -> Thunk:
        op = ins.opcode
        if op in _BOUNDARY:
            return Thunk(ins.name, "boundary", None)
        if op == "async-start":       # runs its wrapped computation's instruction (a fusion, a call)
            inner = [i for cid in ins.called_computation_ids if cid in comps
                     for i in comps[cid].instructions if i.id == comps[cid].root_id]
            if inner:       # its kernels carry the wrapped instruction's name, as without graphs
                wrapped = comps[ins.called_computation_ids[0]]
                return self._thunk(inner[0], comps, {i.id: i for i in wrapped.instructions})
        if op == "copy" or op == "copy-start":
            return Thunk(ins.name, "copy", None)
        if op == "custom-call" or op.endswith("-start") or op in ("all-reduce", "all-gather", "reduce-scatter",
                                                                   "all-to-all", "collective-permute", "send",
                                                                   "recv", "fft", "cholesky", "triangular-solve"):
            return Thunk(ins.name, "library", None)
        if op == "fusion":
            fused, moving = [], set()     # (opcode, element type) of each fused instruction; opcodes of arrays
            for cid in ins.called_computation_ids:
                for i in comps[cid].instructions if cid in comps else ():
                    shape = i.shape
                    fused.append((i.opcode, shape.element_type))
                    if shape.dimensions:        # scalar ops compute indices only
                        moving.add(fused[-1][0])
            if moving and moving <= _COPY_LIKE_FUSED and \
                    not moving.isdisjoint(("dynamic-update-slice", "copy", "slice", "dynamic-slice")):
                return Thunk(ins.name, "copy", self._key(ins, fused, by_id))
            if ins.fusion_kind == "kCustom" and not _named_kernel(ins.name):
                return Thunk(ins.name, "library", None)
            gemm = any(o == "dot" or o == "convolution" for o, _ in fused)
            return Thunk(ins.name, "kernel", self._key(ins, fused, by_id), gemm)
        if op in ("dot", "convolution"):      # unfused, a library call runs it
            return Thunk(ins.name, "library", None)
        return Thunk(ins.name, "kernel", None)

    def _key(self, ins, fused, by_id) -> tuple:
        """What two fusions that share a kernel share: the fusion kind, the result and operand shapes,
        and the fused computation's opcodes and element types in order (XLA reuses a kernel only for
        fusions whose fused computations are identical)."""
        return (ins.fusion_kind, _shape_key(ins.shape),
                tuple(_shape_key(by_id[o].shape) for o in ins.operand_ids if o in by_id), tuple(fused))

    def same_kernel(self, a: Thunk, b: Thunk) -> bool:
        """Whether XLA would run two fusions with one kernel (see `_key`)."""
        return a.fingerprint is not None and a.fingerprint == b.fingerprint

    def attribute(self, launch: list[Launch]) -> tuple[list[Optional[str]], str]:
        """The instruction each kernel of one launch ran (None: unattributed) and the computation
        the launch ran a stretch of ("" when none fits)."""
        key = tuple(launch)
        if key not in self._cache:
            self._cache[key] = self._attribute(launch)
        return self._cache[key]

    def _attribute(self, launch: list[Launch]) -> tuple[list[Optional[str]], str]:
        # memsets go with the kernel after them (a library call's workspace), else the one before
        aligned = [k for k, e in enumerate(launch) if e.kind != "memset"]
        events = [launch[k] for k in aligned]
        best: tuple[float, list[Optional[int]], str] = (float("-inf"), [None] * len(events), "")
        for comp_name, lo, hi in self._candidates(events):
            thunks = self.computations[comp_name][lo:hi]
            score, match = _anchored(events, thunks, self)
            if score > best[0]:
                best = (score, [None if m is None else m + lo for m in match], comp_name)
        _, match, comp_name = best
        thunks = self.computations.get(comp_name, [])
        names: list[Optional[str]] = [None] * len(launch)
        for k, m in zip(aligned, match):
            names[k] = thunks[m].name if m is not None else None
        following: Optional[str] = None
        for k in range(len(launch) - 1, -1, -1):     # memsets: the next attributed kernel's instruction
            if launch[k].kind == "memset":
                names[k] = following
            elif names[k] is not None:
                following = names[k]
        before: Optional[str] = None
        for k in range(len(launch)):
            if names[k] is None and launch[k].kind == "memset":
                names[k] = before
            elif names[k] is not None:
                before = names[k]
        return names, comp_name

    def _candidates(self, events: list[Launch]) -> list[tuple[str, int, int]]:
        """(computation, first thunk, end) stretches worth aligning against: the loop-free stretches of a
        computation (a launch never spans a loop) that hold a thunk whose kernel name a kernel of the
        launch carries; every stretch when none does."""
        found = {(comp, lo, hi) for e in events for comp, lo, hi, _ in self._where.get(e.name, ())}
        return sorted(found) if found else list(self._segments)

    def matches(self, event: Launch, thunk: Thunk) -> float:
        """The score of `event` run by `thunk` (0: it cannot be)."""
        if thunk.kind == "boundary":
            return 0.0
        if event.kind == "copy":
            return _KIND if thunk.kind == "copy" else 0.0
        named = self.kernel_names.get(event.name)
        if named is not None:
            if named.name == thunk.name:
                return _EXACT
            if thunk.kind in ("kernel", "copy") and self.same_kernel(named, thunk):
                return _REUSED
            return _WEAK if thunk.kind == "kernel" and named.kind == "kernel" else 0.0
        if thunk.kind == "library" or thunk.gemm:
            return _KIND
        return _WEAK if thunk.kind == "kernel" and _named_kernel(event.name) else 0.0


_DP_CELLS = 250_000      # a stretch between anchors larger than this is matched greedily, in order


def _anchored(events: list[Launch], thunks: list[Thunk], schedule: Schedule) -> tuple[float, list[Optional[int]]]:
    """`_align` made fast on launches of thousands of kernels: the kernels named after an instruction
    of the stretch, in order, are anchors (the longest chain whose instructions come in schedule
    order; a reused kernel's name points elsewhere and falls out of the chain), and only the events
    between two anchors are aligned against the instructions between them."""
    index = {kernel_name(t.name): k for k, t in enumerate(thunks) if t.kind != "boundary"}
    alike: dict[object, list[int]] = {}
    for k, t in enumerate(thunks):
        if t.fingerprint is not None and t.kind != "boundary":
            alike.setdefault(t.fingerprint, []).append(k)
    pairs = []      # (event, thunk): each event's possible instructions, latest first (one per event in a chain)
    for i, e in enumerate(events):
        named = schedule.kernel_names.get(e.name) if e.kind == "kernel" else None
        if named is None:
            continue
        here = {k for k in alike.get(named.fingerprint, ()) if schedule.same_kernel(named, thunks[k])} \
            if named.fingerprint is not None else set()
        if e.name in index:
            here.add(index[e.name])
        pairs.extend((i, k) for k in sorted(here, reverse=True))
    anchors = _chain(pairs)
    n, m = len(events), len(thunks)
    match: list[Optional[int]] = [None] * n
    score = 0.0
    for (i0, j0), (i1, j1) in zip([(-1, -1)] + anchors, anchors + [(n, m)]):
        if i1 - i0 > 1:
            part, lo = events[i0 + 1:i1], j0 + 1
            stretch = thunks[lo:j1]
            if len(part) * max(len(stretch), 1) <= _DP_CELLS:
                s, got = _align(part, stretch, schedule)
            else:
                s, got = _greedy(part, stretch, schedule)
            score += s
            for k, g in enumerate(got):
                match[i0 + 1 + k] = None if g is None else g + lo
        if i1 < n:
            match[i1] = j1
            score += schedule.matches(events[i1], thunks[j1])
    return score, match


def _chain(pairs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The longest subsequence of (event, thunk) pairs whose thunks strictly increase with the events
    (patience sorting, O(n log n)); an event's pairs are listed latest thunk first, so a chain takes
    at most one of them."""
    import bisect

    tails: list[int] = []          # tails[k]: the smallest thunk index ending a chain of length k+1
    tail_at: list[int] = []        # the pair index of that tail
    back = [-1] * len(pairs)
    for p, (_, j) in enumerate(pairs):    # an event's pairs come latest thunk first: at most one in a chain
        k = bisect.bisect_left(tails, j)
        if k == len(tails):
            tails.append(j)
            tail_at.append(p)
        else:
            tails[k], tail_at[k] = j, p
        back[p] = tail_at[k - 1] if k else -1
    out, p = [], tail_at[-1] if tail_at else -1
    while p >= 0:
        out.append(pairs[p])
        p = back[p]
    return out[::-1]


def _greedy(events: list[Launch], thunks: list[Thunk], schedule: Schedule) -> tuple[float, list[Optional[int]]]:
    """Each event on the next instruction it can be, in order (for stretches too large to align)."""
    match: list[Optional[int]] = []
    score, j = 0.0, 0
    for e in events:
        k = j
        while k < len(thunks) and schedule.matches(e, thunks[k]) <= 0:
            k += 1
        if k < len(thunks):
            match.append(k)
            score += schedule.matches(e, thunks[k])
            j = k + 1
        else:
            match.append(None)
            score -= _LEFT_OVER
    return score, match


def _align(events: list[Launch], thunks: list[Thunk], schedule: Schedule) -> tuple[float, list[Optional[int]]]:
    """The best in-order matching of events to thunks (each thunk once, a library thunk possibly for
    several kernels in a row), free to start and end anywhere in thunks, never across a boundary."""
    n, m = len(events), len(thunks)
    neg = float("-inf")
    # best[i][j]: events[:i] placed, thunks[:j] passed; took[i][j]: the same with events[i-1] on thunks[j-1]
    best = [[neg] * (m + 1) for _ in range(n + 1)]
    took = [[neg] * (m + 1) for _ in range(n + 1)]
    came: dict[tuple[int, int, bool], tuple[int, int, bool, Optional[int]]] = {}
    for j in range(m + 1):
        best[0][j] = 0.0          # free start
    for i in range(n + 1):
        for j in range(m + 1):
            here = max(best[i][j], took[i][j])
            if here == neg:
                continue
            state = (i, j, took[i][j] >= best[i][j])
            if j < m and i > 0:      # an instruction inside the stretch with no kernel
                t = thunks[j]
                if t.kind != "boundary":
                    cost = here - _SKIP
                    if cost > best[i][j + 1]:
                        best[i][j + 1] = cost
                        came[(i, j + 1, False)] = (*state, None)
            elif j < m and i == 0 and thunks[j].kind != "boundary":
                pass        # before the first kernel: free (best[0][j] is already 0)
            if i < n:
                e = events[i]
                if j < m:
                    s = schedule.matches(e, thunks[j])
                    if s > 0 and here + s > took[i + 1][j + 1]:
                        took[i + 1][j + 1] = here + s
                        came[(i + 1, j + 1, True)] = (*state, j)
                if state[2] and j > 0 and e.kind == "kernel" \
                        and (thunks[j - 1].kind == "library" or thunks[j - 1].gemm) \
                        and schedule.kernel_names.get(e.name) is None:
                    if took[i][j] + _EXTRA_KERNEL > took[i + 1][j]:
                        took[i + 1][j] = took[i][j] + _EXTRA_KERNEL
                        came[(i + 1, j, True)] = (i, j, True, j - 1)
                if here - _LEFT_OVER > best[i + 1][j]:
                    best[i + 1][j] = here - _LEFT_OVER
                    came[(i + 1, j, False)] = (*state, None)
    # free end: the best over every j with all events placed
    end_j = max(range(m + 1), key=lambda j: max(best[n][j], took[n][j]))
    score = max(best[n][end_j], took[n][end_j])
    match: list[Optional[int]] = [None] * n
    state = (n, end_j, took[n][end_j] >= best[n][end_j])
    while state in came:
        i0, j0, t0, thunk = came[state]
        if state[0] != i0 and thunk is not None:
            match[state[0] - 1] = thunk
        state = (i0, j0, t0)
    return score, match


def kernel_name(instruction: str) -> str:
    """The name XLA gives the kernel of an instruction (`loop_add_fusion.3` -> `loop_add_fusion_3`):
    every character a symbol cannot hold becomes `_` (LLVM's SanitizeFunctionName); ROCm adds `.kd`."""
    if instruction.endswith(".kd"):
        instruction = instruction[:-3]
    return _UNSAFE.sub("_", instruction)


_UNSAFE = re.compile(r"[^A-Za-z0-9_]")


def _named_kernel(name: str) -> bool:
    """Whether a kernel name looks like one XLA names after an instruction."""
    return bool(re.match(r"(loop|input|wrapped|gemm_fusion|fusion|triton|copy|transpose|reduce|concatenate)", name))


def _shape_key(shape) -> tuple:
    if shape.tuple_shapes:
        return tuple(_shape_key(s) for s in shape.tuple_shapes)
    return (shape.element_type, tuple(shape.dimensions), tuple(shape.layout.minor_to_major))
