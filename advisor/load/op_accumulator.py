"""Op self times per (device, module, op), program executions, and each device's ops as columns."""

from __future__ import annotations

from typing import Iterator, NamedTuple, Optional

import numpy as np

from ..model import OpStat
from .columns import as_spans, distinct, merged, parents, self_times
from .op_store import BLOCK_OPS, OpStore

HOLD_OPS = 4 * BLOCK_OPS     # ops a line holds back behind an open op before it releases the closed ones

NO_MODULE = "(no module)"     # device events that no XLA program launched (e.g. TensorFlow kernels)
CONTINUED = "(continued)"     # the run id of an execution's events after its first: its time counts,
                              # its execution does not count again


def module_key(stats: dict) -> str:
    return f"{stats.get('hlo_module', '?')}({stats.get('program_id', -1)})"


class OpColumns:
    """The ops one device ran, in the order read: start and end (ns) and an index into `pairs`,
    the (module key, op name) of each. Three numbers per op, not an object."""

    def __init__(self, starts: np.ndarray, ends: np.ndarray, keys: np.ndarray, pairs: list[tuple[str, str]]):
        self.starts, self.ends, self.keys, self.pairs = starts, ends, keys, pairs

    def __len__(self) -> int:
        return len(self.starts)

    def __eq__(self, other) -> bool:
        return (isinstance(other, OpColumns) and np.array_equal(self.starts, other.starts)
                and np.array_equal(self.ends, other.ends)
                and [self.pairs[k] for k in self.keys.tolist()] == [other.pairs[k] for k in other.keys.tolist()])

    def __repr__(self) -> str:
        return f"OpColumns({len(self)} ops)"


class Interner(list):
    """Distinct values in the order first seen; id(value) is a value's index."""

    def __init__(self):
        super().__init__()
        self._ids: dict = {}

    def id(self, value) -> int:
        i = self._ids.get(value)
        if i is None:
            i = self._ids[value] = len(self)
            self.append(value)
        return i


class _Part(NamedTuple):
    """A block's ops (in the window): start, end and self time (ns), op key, place."""
    starts: np.ndarray
    ends: np.ndarray
    own: np.ndarray
    keys: np.ndarray
    places: np.ndarray
    device: str


class LineOps:
    """One line's ops, added chunk by chunk, into the accumulator's store in blocks sorted by start.

    Self times need each op's children, which may come in later chunks: an op stays open while
    a later op could start inside it (its end is past the latest start read), and the ops from
    the first open one on are held back, so that blocks keep the line's order by start. Profilers write lines
    sorted by start; a line that is not is gathered whole and sorted at the end (`_gather`).
    Behind an op that stays open for long, more than HOLD_OPS ops are not held: the closed
    ones go out of order (`_compact`).
    """

    def __init__(self, acc: "OpAccumulator", device: str, line: int, flat: bool = False):
        self.acc, self.device, self.line = acc, device, line
        self.flat = flat              # events never nest (GPU streams): self time is the duration
        self.last = -np.inf           # the latest start read
        self.count = 0                # ops read: the index of the next one
        self.held: list[list] = []    # [first index, starts, ends, own, keys, places], in order
        self.open = np.empty(0, dtype=np.int64)       # indices of the open ops, in order
        self.open_span = (np.empty(0), np.empty(0), np.empty(0))    # their starts, ends, own so far
        self.ready: list[tuple] = []  # ops done and in order, not yet a block
        self.ready_n = 0
        self.whole: Optional[list[tuple]] = None      # a line out of order: all of it, sorted at close

    def add(self, starts: np.ndarray, durs: np.ndarray, places: np.ndarray, names: np.ndarray) -> None:
        if not len(starts):
            return
        keys = self.acc.keys_of(places, names)
        if np.any(starts[1:] < starts[:-1]):
            order = np.argsort(starts, kind="stable")
            starts, durs, places, keys = starts[order], durs[order], places[order], keys[order]
        ends = starts + durs
        if self.whole is None and starts[0] < self.last:
            self._gather()
        if self.whole is not None:
            self.whole.append((starts, ends, keys, places))
            return
        self._stream(starts, ends, keys, places)

    def _stream(self, starts, ends, keys, places) -> None:
        n_open, n = len(self.open), len(starts)
        o_starts, o_ends, o_own = self.open_span
        s, e = np.concatenate([o_starts, starts]), np.concatenate([o_ends, ends])
        if self.flat:       # kernels of a graph may run side by side: overlapping is not nesting
            parent = np.full(n, -1, dtype=np.int64)
        else:
            parent = parents(s, e)[n_open:]       # an op read before can only be the parent of a new one if open
        durs = ends - starts
        child = parent >= 0
        own = np.concatenate([o_own, durs]) - np.bincount(parent[child], weights=durs[child], minlength=n_open + n)
        index = np.concatenate([self.open, self.count + np.arange(n)])
        self.held.append([self.count, starts, ends, own[n_open:].copy(), keys, places])
        self.count += n
        self.last = float(starts[-1])
        still = e > self.last if not self.flat else np.zeros(len(e), dtype=bool)
        self._settle(index[:n_open][~still[:n_open]], own[:n_open][~still[:n_open]])
        self.open, self.open_span = index[still], (s[still], e[still], own[still])
        self._release(int(self.open[0]) if len(self.open) else self.count)
        if sum(len(h[1]) for h in self.held) > HOLD_OPS:
            self._compact()

    def _compact(self) -> None:
        """Behind an op open for long (a loop over the whole run), release the closed ops now,
        out of the line's order, keeping only the open ones: blocks are each sorted by start,
        and what is held stays bounded."""
        kept = []
        for first, *columns in self.held:
            index = first + np.arange(len(columns[0]))
            is_open = np.isin(index, self.open)
            if not is_open.all():
                self._ready(tuple(c[~is_open] for c in columns))
            kept.extend([int(index[j]), *(c[j:j + 1].copy() for c in columns)] for j in np.nonzero(is_open)[0])
        self.held = kept
        self._flush()      # the held ops, released later, start before these: not in the same block

    def _settle(self, index: np.ndarray, own: np.ndarray) -> None:
        """Write the final self time of ops that closed into the held columns."""
        if not len(index):
            return
        firsts = np.array([h[0] for h in self.held])
        piece = np.searchsorted(firsts, index, side="right") - 1
        for p in distinct(piece).tolist():
            mine = piece == p
            self.held[p][3][index[mine] - self.held[p][0]] = own[mine]

    def _release(self, upto: int) -> None:
        """Ops before index `upto` are done: to blocks."""
        while self.held and self.held[0][0] < upto:
            first, *columns = self.held[0]
            take = upto - first
            if take >= len(columns[0]):
                self.held.pop(0)
                self._ready(tuple(columns))
            else:
                self._ready(tuple(c[:take] for c in columns))
                self.held[0] = [upto, *(c[take:] for c in columns)]
        if self.ready_n >= BLOCK_OPS:
            self._flush()

    def _ready(self, columns: tuple) -> None:
        self.ready.append(columns)
        self.ready_n += len(columns[0])

    def _flush(self) -> None:
        if self.ready:
            columns = tuple(np.concatenate([r[k] for r in self.ready]) for k in range(5))
            for lo in range(0, len(columns[0]), BLOCK_OPS):
                self.acc.store.add(tuple(c[lo:lo + BLOCK_OPS] for c in columns), self.device, self.line)
            self.ready, self.ready_n = [], 0

    def _finish_stream(self) -> None:
        """No more ops come: the open ones close as they are, and everything goes to blocks."""
        self._settle(self.open, self.open_span[2])
        self.open = np.empty(0, dtype=np.int64)
        self._release(self.count)
        self._flush()

    def _gather(self) -> None:
        """From here on the line is read whole: what it gave so far comes back from the store."""
        self._finish_stream()
        self.whole = [(c[0], c[1], c[3], c[4]) for c in self.acc.store.take_line(self.line)]

    def close(self) -> None:
        if self.whole is not None:
            if self.whole:
                starts, ends, keys, places = (np.concatenate([w[k] for w in self.whole]) for k in range(4))
                order = np.argsort(starts, kind="stable")
                starts, ends, keys, places = starts[order], ends[order], keys[order], places[order]
                own = ends - starts if self.flat else self_times(starts, ends)
                self._ready((starts, ends, own, keys, places))
                self._flush()
            self.whole = []
            return
        self._finish_stream()


class OpAccumulator:
    """Lines of op events in; per-op aggregates, program executions and per-device columns out,
    over the whole trace or over a window of it (ops that start inside it).

    An op event is (start, duration, place, name): `place` indexes `places`, the (module key,
    run id or None, device) of the program execution it belongs to, and `name` indexes `names`.
    Each op is kept as five numbers (40 bytes) in the store's blocks, never as an object, and
    every aggregate is taken block by block.
    """

    def __init__(self, store: Optional[OpStore] = None):
        self.names = Interner()        # op names
        self.modules = Interner()      # module keys
        self.places = Interner()       # (module key, run id or None, device) of program executions
        self._place_module: list[int] = []     # each place's module, as an index into modules
        self._place_counts: list[int] = []     # 1: the place's events are executions; 0: continued ones
        self.pairs = Interner()        # (module key, op name) of each op key
        self.store = store if store is not None else OpStore()
        self.waits = OpStore(budget=4 << 20)    # waits for peers (CPU collectives): start, end, place
        self._lines = 0
        self.device_busy: list[tuple[float, float]] = []   # GPU/TPU: kernel intervals
        self.window: Optional[tuple[float, float]] = None   # set: every figure is over this window
        self._cache: dict = {}

    def name_id(self, name: str) -> int:
        return self.names.id(name)

    def place_id(self, module: str, run_id, device: str) -> int:
        i = self.places.id((module, run_id, device))
        if i == len(self._place_module):
            self._place_module.append(self.modules.id(module))
            self._place_counts.append(0 if run_id == CONTINUED else 1)
        return i

    def keys_of(self, places: np.ndarray, names: np.ndarray) -> np.ndarray:
        """The op key (an index into pairs: module key, op name) of each op."""
        width = len(self.names) + 1
        codes = np.array(self._place_module, dtype=np.int64)[places] * width + names
        uniq, inverse = np.unique(codes, return_inverse=True)
        key_of = np.array([self.pairs.id((self.modules[c // width], self.names[c % width])) for c in uniq.tolist()],
                          dtype=np.int64)
        return key_of[inverse]

    def add_waits(self, starts: np.ndarray, durs: np.ndarray, places: np.ndarray) -> None:
        """Waits for peers inside collectives, each in the place (execution, device) it waited in
        (the store sorts them by start)."""
        zeros = np.zeros(len(starts))
        self.waits.add((starts, starts + durs, zeros, zeros.astype(np.int64), places), "", 0)

    def line(self, device: str = "", flat: bool = False) -> LineOps:
        """A line to add ops to chunk by chunk; `device` names the line's ops in the per-op
        aggregates ("" on CPU, where the executor threads serve every device, or the GPU/TPU plane);
        `flat`: its events never nest (a GPU stream), so each one's self time is its duration."""
        self._lines += 1
        return LineOps(self, device, self._lines, flat)

    def _windowed(self) -> Iterator[_Part]:
        for block, (starts, ends, own, keys, places) in self.store.columns(self.window):
            yield _Part(starts, ends, own, keys, places, block.device)

    def _cached(self, name: str, compute):
        """Aggregates are computed once per window (they are read several times)."""
        key = (name, self.window, len(self.store.blocks))
        if key not in self._cache:
            self._cache[key] = compute()
        return self._cache[key]

    @property
    def by_key(self) -> dict[tuple[str, str, str], list]:
        """(device, module, op) -> [self ns, count], in the order the ops were first read."""
        return self._cached("by_key", self._by_key)

    def _by_key(self) -> dict[tuple[str, str, str], list]:
        out: dict[tuple[str, str, str], list] = {}
        for part in self._windowed():
            if not len(part.starts):
                continue
            uniq, first, inverse = np.unique(part.keys, return_index=True, return_inverse=True)
            self_sum = np.bincount(inverse, weights=np.where(part.own > 0, part.own, 0.0), minlength=len(uniq))
            counted = np.array(self._place_counts, dtype=np.float64)[part.places]
            count = np.rint(np.bincount(inverse, weights=counted, minlength=len(uniq))).astype(np.int64)
            for j in np.argsort(first, kind="stable").tolist():   # first seen first, as the ops were read
                module, op = self.pairs[int(uniq[j])]
                entry = out.get((part.device, module, op))
                if entry is None:
                    entry = out[(part.device, module, op)] = [0.0, 0]
                entry[0] += float(self_sum[j])
                entry[1] += int(count[j])
        return out

    @property
    def runs(self) -> dict[tuple[str, int], list[float]]:
        """(module, run id) -> [start, end] of each program execution whose ops carry a run id."""
        return self._cached("runs", self._runs)

    def _runs(self) -> dict[tuple[str, int], list[float]]:
        with_run = [p for p, (_, run_id, _) in enumerate(self.places) if run_id is not None and run_id != CONTINUED]
        out: dict[tuple[str, int], list[float]] = {}
        if not with_run:
            return out
        for part in self._windowed():
            mask = np.isin(part.places, with_run)
            if not mask.any():
                continue
            uniq, inverse = np.unique(part.places[mask], return_inverse=True)
            lo = np.full(len(uniq), np.inf)
            hi = np.full(len(uniq), -np.inf)
            np.minimum.at(lo, inverse, part.starts[mask])
            np.maximum.at(hi, inverse, part.ends[mask])
            for j, place in enumerate(uniq.tolist()):
                module, run_id, _ = self.places[place]
                span = out.get((module, run_id))
                if span is None:
                    out[(module, run_id)] = [float(lo[j]), float(hi[j])]
                else:
                    span[0], span[1] = min(span[0], float(lo[j])), max(span[1], float(hi[j]))
        return out

    @property
    def device_ops(self) -> "DeviceOps":
        return DeviceOps(self)

    def op_intervals(self) -> tuple[np.ndarray, np.ndarray]:
        """(starts, ends) of every op read (in the window), on every device: all in memory, for
        traces whose ops carry no run ids (busy_spans)."""
        parts = list(self._windowed())
        if not parts:
            return np.empty(0), np.empty(0)
        return np.concatenate([p.starts for p in parts]), np.concatenate([p.ends for p in parts])

    def last_end_after(self, marks: np.ndarray) -> np.ndarray:
        """For each of the sorted times `marks`, the latest end of the ops that start at or after
        it and before the next one (-inf where none does)."""
        out = np.full(len(marks), -np.inf)
        for part in self._windowed():
            period = np.searchsorted(marks, part.starts, side="right") - 1
            inside = period >= 0
            np.maximum.at(out, period[inside], part.ends[inside])
        return out

    def busy_spans(self) -> list[tuple[float, float]]:
        """When the device was executing: program executions on CPU, op intervals on devices."""
        if self.device_busy:
            return clip_spans(self.device_busy, self.window)
        runs = self.runs
        if runs:
            return [tuple(span) for span in runs.values()]
        return as_spans(*merged(*self.op_intervals()))

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


def clip_spans(spans, window) -> list[tuple[float, float]]:
    """The parts of spans inside window (all of them when window is None)."""
    if window is None:
        return list(spans)
    lo, hi = window
    return [(max(s, lo), min(e, hi)) for s, e in spans if s < hi and e > lo]


class DeviceOps:
    """The ops each device ran (in the window), read block by block from the store: devices are
    the `device` of each op's place."""

    def __init__(self, acc: OpAccumulator):
        self.store, self.wait_store, self.window, self.pairs = acc.store, acc.waits, acc.window, acc.pairs
        devices = Interner()
        self.place_device = np.array([devices.id(device) for _, _, device in acc.places], dtype=np.int64)
        self.devices: list[str] = list(devices)

    def _within(self, window: Optional[tuple[float, float]]) -> Optional[tuple[float, float]]:
        """window, and the steps' window if one was asked."""
        if window is None or self.window is None:
            return window if window is not None else self.window
        return max(window[0], self.window[0]), min(window[1], self.window[1])

    def blocks(self, window: Optional[tuple[float, float]] = None) -> Iterator[tuple[np.ndarray, ...]]:
        """(device index, start, end, op key) of each op, block by block; within `window` too."""
        for _, (starts, ends, _, keys, places) in self.store.columns(self._within(window)):
            if len(starts):
                yield self.place_device[places], starts, ends, keys

    def waits(self, window: tuple[float, float]) -> Iterator[tuple[np.ndarray, ...]]:
        """(device index, start, end) of each wait for peers that starts in window (and the steps')."""
        for _, (starts, ends, _, _, places) in self.wait_store.columns(self._within(window)):
            if len(starts):
                yield self.place_device[places], starts, ends

    def columns(self) -> dict[str, OpColumns]:
        """Each device's ops as columns in memory, in the order read, devices in the order they
        first ran an op (for tests and small traces)."""
        pieces: dict[int, list[tuple]] = {}
        for device, starts, ends, keys in self.blocks():
            used, first = np.unique(device, return_index=True)
            for d in used[np.argsort(first)].tolist():
                mine = device == d
                pieces.setdefault(d, []).append((starts[mine], ends[mine], keys[mine]))
        return {self.devices[d]: OpColumns(*(np.concatenate([p[k] for p in ps]) for k in range(3)), self.pairs)
                for d, ps in pieces.items()}

    def __len__(self) -> int:
        return sum(len(starts) for _, starts, _, _ in self.blocks())

    def __eq__(self, other) -> bool:
        return isinstance(other, DeviceOps) and self.columns() == other.columns()

    def __repr__(self) -> str:
        return f"DeviceOps({len(self)} ops on {len(self.devices)} devices)"

