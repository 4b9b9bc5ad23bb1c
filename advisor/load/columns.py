"""Events as columns: the chunks a line gives, and the array arithmetic the timeline is built with.

The streaming reader's lines give their events as `Chunk`s (xplane_stream); a ProfileData line
is turned into the same (`chunks_of`), so the timeline reader takes either. What the timeline
keeps per op is three numbers (start, end, an interned key), never an object per event.
"""

from __future__ import annotations

from typing import Callable, Iterator

import numpy as np


class ListChunk:
    """A ProfileData line's events as one chunk, its event names interned as per-plane ids."""
    __slots__ = ("ids", "start_ns", "dur_ns", "_events", "names")

    def __init__(self, events: list, ids: dict[str, int]):
        self._events = events
        for ev in events:
            if ev.name not in ids:
                ids[ev.name] = len(ids) + 1
        self.names = {i: name for name, i in ids.items()}
        self.ids = np.array([ids[ev.name] for ev in events], dtype=np.int64)
        self.start_ns = np.array([ev.start_ns for ev in events], dtype=np.float64)
        self.dur_ns = np.array([ev.duration_ns for ev in events], dtype=np.float64)

    def __len__(self) -> int:
        return len(self._events)

    def stats(self, i: int, wanted: frozenset) -> dict:
        return {k: v for k, v in self._events[i].stats if k in wanted}

    def stat_items(self, i: int):
        return iter(self._events[i].stats)


def in_window(start: float, window) -> bool:
    """Whether an event starting at `start` counts in the window of steps (any, when window is None)."""
    return window is None or window[0] <= start < window[1]


def chunks_of(line, plane_ids: dict[str, int], all_stats: bool = False) -> Iterator:
    """The line's events as chunks: the streaming reader's own, or a ProfileData line's as one.
    all_stats: the caller reads every event's stats (the streaming reader then parses them at once)."""
    if hasattr(line, "chunks"):
        yield from line.chunks(all_stats)
        return
    events = list(line.events)
    if events:
        yield ListChunk(events, plane_ids)


_LUT_LIMIT = 1 << 22     # metadata ids up to this are looked up in an array; larger ones (never seen
                         # from a profiler, but a damaged file may say anything) by sorting


def classify(chunk, fn: Callable[[str], int], cache: dict) -> np.ndarray:
    """fn(name) (an int >= 0) of each event, computed once per distinct metadata id: `cache`
    holds, per plane, the values found so far."""
    ids = chunk.ids
    names = chunk.names
    if not len(ids):
        return np.empty(0, dtype=np.int64)
    low, high = int(ids.min()), int(ids.max())
    if low < 0 or high >= _LUT_LIMIT:
        uniq, inverse = np.unique(ids, return_inverse=True)
        seen = cache.setdefault("by_id", {})
        values = np.array([seen[i] if i in seen else seen.setdefault(i, fn(names.get(i, ""))) for i in uniq.tolist()],
                          dtype=np.int64)
        return values[inverse]
    lut = cache.get("lut")
    if lut is None or len(lut) <= high:
        grown = np.full(max(high + 1, 2 * len(lut) if lut is not None else 0), -1, dtype=np.int64)
        if lut is not None:
            grown[:len(lut)] = lut
        lut = cache["lut"] = grown
    values = lut[ids]
    missing = values < 0
    if missing.any():
        for i in distinct(ids[missing]).tolist():
            lut[i] = fn(names.get(i, ""))
        values = lut[ids]
    return values


def distinct(values: np.ndarray) -> np.ndarray:
    """The sorted distinct values, as np.unique(values) gives them; np.unique without its index
    arguments imports numpy.ma on first use (10 ms of every short command's start)."""
    if not len(values):
        return values[:0]
    ordered = np.sort(values)
    return ordered[np.concatenate(([True], ordered[1:] != ordered[:-1]))]


def parents(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """For events sorted by start on one thread, each one's parent (or -1): the latest event
    before it that it starts inside, as a stack of open events would nest them."""
    n = len(starts)
    parent = np.full(n, -1, dtype=np.int64)
    if n < 2:
        return parent
    last = np.searchsorted(starts, ends, side="left")    # descendants of i: i+1 .. last[i]-1
    for i in np.nonzero(last > np.arange(n) + 1)[0].tolist():   # outer first: an inner one overwrites
        parent[i + 1:last[i]] = i
    return parent


def self_times(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Each event's duration less that of the events directly inside it (see `parents`)."""
    own = ends - starts
    parent = parents(starts, ends)
    child = parent >= 0
    if not child.any():
        return own.copy()
    return own - np.bincount(parent[child], weights=own[child], minlength=len(own))


def merged(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Union of [start, end) intervals as sorted disjoint (starts, ends): touching ones join."""
    if not len(starts):
        return starts[:0].astype(np.float64), ends[:0].astype(np.float64)
    order = np.lexsort((ends, starts))
    s, e = starts[order], ends[order]
    reach = np.maximum.accumulate(e)
    new = np.empty(len(s), dtype=bool)
    new[0] = True
    new[1:] = s[1:] > reach[:-1]
    first = np.nonzero(new)[0]
    last = np.append(first[1:], len(s)) - 1
    return s[first], reach[last]


def as_spans(starts: np.ndarray, ends: np.ndarray) -> list[tuple[float, float]]:
    return list(zip(starts.tolist(), ends.tolist()))


def overlap_in(starts: np.ndarray, ends: np.ndarray, windows) -> float:
    """How much of the windows [(start, end), ...] the disjoint sorted spans cover, summed."""
    total = 0.0
    for w_start, w_end in windows:
        lo = np.searchsorted(ends, w_start, side="right")
        hi = np.searchsorted(starts, w_end, side="left")
        if hi > lo:
            part = np.minimum(ends[lo:hi], w_end) - np.maximum(starts[lo:hi], w_start)
            total += float(part[part > 0].sum())
    return total


def intersect(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Where two sets of disjoint sorted spans overlap, as disjoint sorted spans."""
    (a_s, a_e), (b_s, b_e) = a, b
    out_s, out_e = [], []
    for s, e in zip(a_s.tolist(), a_e.tolist()):
        lo = np.searchsorted(b_e, s, side="right")
        hi = np.searchsorted(b_s, e, side="left")
        if hi > lo:
            cs, ce = np.maximum(b_s[lo:hi], s), np.minimum(b_e[lo:hi], e)
            keep = cs < ce
            out_s.append(cs[keep])
            out_e.append(ce[keep])
    if not out_s:
        return np.empty(0), np.empty(0)
    return np.concatenate(out_s), np.concatenate(out_e)
