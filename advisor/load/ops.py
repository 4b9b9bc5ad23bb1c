"""Op self times per (device, module, op), program executions, and each device's ops as columns."""

from __future__ import annotations

from typing import Optional

import numpy as np

from ..model import OpStat
from .columns import as_spans, merged, self_times

NO_MODULE = "(no module)"     # device events that no XLA program launched (e.g. TensorFlow kernels)


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


class _Part:
    """One line's ops, sorted by start: start, end and self time (ns), op key, place."""
    __slots__ = ("starts", "ends", "own", "keys", "places", "device")

    def __init__(self, starts, ends, own, keys, places, device: str):
        self.starts, self.ends, self.own, self.keys, self.places, self.device = starts, ends, own, keys, places, device

    def within(self, window) -> "_Part":
        """The ops that start inside window: a slice (views, no copy), the part being sorted by start."""
        if window is None:
            return self
        lo, hi = np.searchsorted(self.starts, window, side="left")
        return _Part(self.starts[lo:hi], self.ends[lo:hi], self.own[lo:hi], self.keys[lo:hi], self.places[lo:hi],
                     self.device)


class OpAccumulator:
    """Lines of op events in; per-op aggregates, program executions and per-device columns out,
    over the whole trace or over a window of it (ops that start inside it).

    An op event is (start, duration, place, name): `place` indexes `places`, the (module key,
    run id or None, device) of the program execution it belongs to, and `name` indexes `names`.
    Each op is kept as five numbers (about 36 bytes), never as an object.
    """

    def __init__(self):
        self.names = Interner()        # op names
        self.modules = Interner()      # module keys
        self.places = Interner()       # (module key, run id or None, device) of program executions
        self._place_module: list[int] = []     # each place's module, as an index into modules
        self.pairs = Interner()        # (module key, op name) of each op key
        self._parts: list[_Part] = []
        self.device_busy: list[tuple[float, float]] = []   # GPU/TPU: kernel intervals
        self.window: Optional[tuple[float, float]] = None   # set: every figure is over this window
        self._cache: dict = {}

    def name_id(self, name: str) -> int:
        return self.names.id(name)

    def place_id(self, module: str, run_id, device: str) -> int:
        i = self.places.id((module, run_id, device))
        if i == len(self._place_module):
            self._place_module.append(self.modules.id(module))
        return i

    def add_line(self, starts: np.ndarray, durs: np.ndarray, places: np.ndarray, names: np.ndarray,
                 device: str = "") -> None:
        """The op events of one line (any order: sorted here, ties kept in line order); `device`
        names the line's ops in the per-op aggregates ("" on CPU, where the executor threads
        serve every device, or the GPU/TPU plane)."""
        if not len(starts):
            return
        order = np.argsort(starts, kind="stable")
        starts, durs, places, names = starts[order], durs[order], places[order], names[order]
        ends = starts + durs
        width = len(self.names) + 1
        codes = np.array(self._place_module, dtype=np.int64)[places] * width + names
        uniq, inverse = np.unique(codes, return_inverse=True)
        key_of = np.array([self.pairs.id((self.modules[c // width], self.names[c % width])) for c in uniq.tolist()],
                          dtype=np.int64)
        self._parts.append(_Part(starts, ends, self_times(starts, ends), key_of[inverse], places, device))

    def _windowed(self) -> list[_Part]:
        return [p.within(self.window) for p in self._parts]

    def _cached(self, name: str, compute):
        """Aggregates are computed once per window (they are read several times)."""
        key = (name, self.window, len(self._parts))
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
            count = np.bincount(inverse, minlength=len(uniq))
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
        with_run = [p for p, (_, run_id, _) in enumerate(self.places) if run_id is not None]
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
    def device_ops(self) -> dict[str, OpColumns]:
        """Each device's ops, in the order read, devices in the order they first ran an op."""
        pieces: dict[str, list[tuple[np.ndarray, np.ndarray, np.ndarray]]] = {}
        for part in self._windowed():
            if not len(part.starts):
                continue
            used, first = np.unique(part.places, return_index=True)
            by_device: dict[str, list[int]] = {}
            for place in used[np.argsort(first)].tolist():
                by_device.setdefault(self.places[place][2], []).append(place)
            for device, mine in by_device.items():
                if len(by_device) == 1:
                    pieces.setdefault(device, []).append((part.starts, part.ends, part.keys))
                else:
                    mask = np.isin(part.places, mine)
                    pieces.setdefault(device, []).append((part.starts[mask], part.ends[mask], part.keys[mask]))
        return {dev: OpColumns(np.concatenate([p[0] for p in ps]), np.concatenate([p[1] for p in ps]),
                               np.concatenate([p[2] for p in ps]), self.pairs) for dev, ps in pieces.items()}

    def op_intervals(self) -> tuple[np.ndarray, np.ndarray]:
        """(starts, ends) of every op read (in the window), on every device."""
        parts = self._windowed()
        if not parts:
            return np.empty(0), np.empty(0)
        return np.concatenate([p.starts for p in parts]), np.concatenate([p.ends for p in parts])

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
