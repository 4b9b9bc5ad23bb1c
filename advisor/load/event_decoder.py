"""The streaming reader's decoder of event fields: a run of whole `events` fields of a line, read
with numpy straight from the bytes, one field of all events at a time.

Each event's metadata id, offset and duration come out as columns; its stats are parsed by
protobuf only when a reader asks for them (`LazyEvents`). Where the bytes are not what protobuf
would read the same way (a wire type other than the schema's, a group, damage), the decoder
declines (None) and the caller parses the run with protobuf (advisor/load/xplane_stream.py).
"""

from __future__ import annotations

import numpy as np

from .wire import LEN
from .xplane import EVENT_TAG, LINE_EVENTS, XEvent, XLine, parse

_PAD = 16    # zero bytes after a copied run: a varint read near its end stops inside the copy
_LAZY_READS = 32    # events whose stats are parsed one by one (at least) before the whole run is parsed


def _varints(a: np.ndarray, at: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(value, width in bytes) of the varint at each position `at` of the byte array `a`;
    width 0 where it runs past 10 bytes (damage)."""
    b = a[at]
    value = (b & 0x7F).astype(np.uint64)
    width = np.ones(len(at), dtype=np.int64)
    more = np.flatnonzero(b >= 0x80)
    shift = 7
    while len(more):
        if shift > 63:
            width[more] = 0
            break
        b = a[at[more] + width[more]]
        value[more] |= (b & 0x7F).astype(np.uint64) << np.uint64(shift)
        width[more] += 1
        more = more[b >= 0x80]
        shift += 7
    return value, width


_CONT = np.uint64(0x8080808080808080)
_LOW7 = np.uint64(0x7F7F7F7F7F7F7F7F)
_PACK = [(np.uint64(0x007F007F007F007F), np.uint64(0x7F007F007F007F00), np.uint64(1)),
         (np.uint64(0x00003FFF00003FFF), np.uint64(0x3FFF00003FFF0000), np.uint64(2)),
         (np.uint64(0x000000000FFFFFFF), np.uint64(0x0FFFFFFF00000000), np.uint64(4))]


def _wide_varints(a: np.ndarray, words: np.ndarray, at: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`_varints` for values of many bytes (offsets and durations in ps): the 8 bytes at each
    position read as one little-endian word (`words`: a[i:i + 8] at i), the bytes up to the first
    without a continuation bit kept and their 7-bit groups packed together, all in a few array
    operations instead of one round per byte. Varints over 8 bytes go to `_varints`."""
    w = words[at]
    stop = ~w & _CONT
    low = stop & (~stop + np.uint64(1))          # the last byte's high bit
    kept = (low << np.uint64(1)) - np.uint64(1)
    value = w & kept & _LOW7
    for keep, move, shift in _PACK:
        value = (value & keep) | ((value & move) >> shift)
    width = np.bitwise_count(kept).astype(np.int64) >> 3
    longer = np.flatnonzero(stop == 0)
    if len(longer):
        value[longer], width[longer] = _varints(a, at[longer])
    return value, width


def _frame(a: np.ndarray, n: int):
    """The run of whole event fields at the start of a[:n] (a[0] is an event's tag): (body starts,
    body ends, the run's length in bytes), or None where no whole event is found.

    Each byte equal to the event tag is a candidate field start, and its length says where the
    next field would start: the events are the chain of these steps from a[0]. A candidate that
    no earlier candidate's field covers is on that chain (a stat, or a tag byte inside a value,
    lies inside its event); the events such a covering hides (behind a value's byte that looks
    like a field landing on a candidate) are found by following the steps from the ones found, a
    few rounds. The chain ends at its first step that does not land on the next node found:
    whatever else was found lies after it."""
    is_tag = np.empty(n + 2, dtype=bool)      # and where a step lands: at n, the end (True); past it, False
    np.equal(a[:n], EVENT_TAG, out=is_tag[:n])
    is_tag[n], is_tag[n + 1] = True, False
    cand = np.flatnonzero(is_tag[:n])
    nxt = cand + 2 + a[cand + 1]          # most lengths are one byte
    longer = np.flatnonzero(a[cand + 1] >= 0x80)
    if len(longer):
        length, width = _varints(a, cand[longer] + 1)
        nxt[longer] = cand[longer] + 1 + width + np.minimum(length, np.uint64(n + 1)).astype(np.int64)
        nxt[longer[width == 0]] = -1
    found = _found(cand, nxt, nxt, is_tag, n, 8)
    if found is None:       # stray tag bytes hid many events: only fields that land on a candidate (or
        # the end) cover, which a stray byte's length mostly does not
        found = _found(cand, nxt, np.where(is_tag[np.minimum(nxt, n + 1)], nxt, 0), is_tag, n, 16)
    if found is None:       # values full of tag bytes: the chain itself, by pointer doubling
        found = _doubled_chain(cand, nxt)
    nodes = np.flatnonzero(found)
    starts, steps = cand[nodes], nxt[nodes]
    breaks = np.flatnonzero(steps[:-1] != starts[1:])
    k = int(breaks[0]) if len(breaks) else len(nodes) - 1      # the chain is nodes[:k + 1]
    last = int(steps[k])
    if last == n:
        run = n
    elif last > n or last < 0:      # the last event goes on past the window (or its length is damaged)
        k, run = k - 1, int(starts[k])
    else:                           # another field follows the events
        run = last
    if k < 0:
        return None
    at = cand[nodes[:k + 1]]
    body = at + 2
    longer = np.flatnonzero(a[at + 1] >= 0x80)
    if len(longer):
        body[longer] = at[longer] + 1 + _varints(a, at[longer] + 1)[1]
    return body, nxt[nodes[:k + 1]], run


def _found(cand, nxt, covers, is_tag, n: int, rounds: int):
    """The candidates that no earlier one's field (as far as `covers`) covers, with those reached by
    following the steps from them; None if that takes more than `rounds` rounds."""
    found = np.empty(len(cand), dtype=bool)
    found[0] = True
    found[1:] = cand[1:] >= np.maximum.accumulate(covers)[:-1]
    seen = np.zeros(n + 1, dtype=bool)
    seen[cand[found]] = True
    step = nxt[found]
    for _ in range(rounds):
        step = step[(step >= 0) & (step < n)]
        step = step[is_tag[step] & ~seen[step]]
        if not len(step):
            return found
        seen[step] = True
        at = np.searchsorted(cand, step)
        found[at] = True
        step = nxt[at]
    return None


def _doubled_chain(cand: np.ndarray, nxt: np.ndarray) -> np.ndarray:
    """The candidates on the chain of steps from the first: each round doubles both the steps
    taken and the length of the chain known (log2 of its length rounds, each over every candidate)."""
    m = len(cand)
    at = np.minimum(np.searchsorted(cand, nxt), m - 1)
    jump = np.append(np.where(cand[at] == nxt, at, m), m)      # m: the chain stops
    chain = np.zeros(1, dtype=np.int64)
    while True:
        grown = np.union1d(chain, jump[chain])
        if len(grown) == len(chain):
            break
        chain, jump = grown, jump[jump]
    found = np.zeros(m, dtype=bool)
    found[chain[chain < m]] = True
    return found


def _event_fields(a: np.ndarray, words: np.ndarray, starts: np.ndarray, ends: np.ndarray):
    """(metadata_id, offset_ps, duration_ps) of the events with bodies a[starts:ends]; None where a
    field is not one protobuf would read the same way here (a wire type other than the schema's,
    a group, damage): the caller parses those.

    Each event's fields are read in order, one field of every event at a time: first the three
    numbers where writers put them, then the stats (skipped: read when asked for), then, for the
    events with anything else after that, any field (`_other_fields`)."""
    n_events = len(starts)
    ids, offsets, durations = (np.zeros(n_events, dtype=np.int64) for _ in range(3))
    pos = starts.copy()
    for tag, column in ((0x08, ids), (0x10, offsets), (0x18, durations)):
        at = np.flatnonzero((a[pos] == tag) & (pos < ends))
        value, width = _wide_varints(a, words, pos[at] + 1)
        if not width.all():
            return None
        column[at] = value.view(np.int64)
        pos[at] += 1 + width
    if (pos > ends).any():
        return None
    which = np.flatnonzero(pos < ends)
    pos, ends = pos[which], ends[which]
    for _ in range(64):
        if not len(which):
            break
        stat = a[pos] == EVENT_TAG
        if not stat.all():      # events with other fields after their stats
            other = ~stat
            if not _other_fields(a, which[other], pos[other], ends[other], ids, offsets, durations):
                return None
            which, pos, ends = which[stat], pos[stat], ends[stat]
        length = a[pos + 1]
        if (length < 0x80).all():       # stats are short: a one-byte length
            pos = pos + 2 + length
        else:
            length, width = _varints(a, pos + 1)
            if not width.all():
                return None
            pos = pos + 1 + width + np.minimum(length, np.uint64(1 << 40)).astype(np.int64)
        if (pos > ends).any():
            return None
        live = pos < ends
        if not live.all():
            which, pos, ends = which[live], pos[live], ends[live]
    else:
        return None
    return ids, offsets, durations


def _other_fields(a, which, pos, ends, ids, offsets, durations) -> bool:
    """Read the rest of some events' fields, any field in any order, as protobuf does (the last of a
    repeated number wins; num_occurrences clears offset_ps, its oneof partner); False where one
    is not read the same way here."""
    for _ in range(64):
        if not len(which):
            return True
        tag = a[pos]
        if (tag >= 0x80).any() or (tag < 8).any():      # a field number over 15, or 0
            return False
        wire, field = tag & 7, tag >> 3
        value, width = _varints(a, pos + 1)
        varint, nested = wire == 0, wire == LEN
        if (~width.astype(bool) & (varint | nested)).any():
            return False
        scalar = (field == 1) | (field == 2) | (field == 3) | (field == 5)
        if (scalar & ~varint).any() or ((field == LINE_EVENTS) & ~nested).any():
            return False
        if not (varint | nested | (wire == 1) | (wire == 5)).all():
            return False
        skip = np.where(nested, width + np.minimum(value, np.uint64(1 << 40)).astype(np.int64),
                        np.where(varint, width, np.where(wire == 1, 8, 4)))
        pos = pos + 1 + skip
        if (pos > ends).any():
            return False
        value = value.view(np.int64)
        for number, column in ((1, ids), (2, offsets), (3, durations)):
            hit = field == number
            column[which[hit]] = value[hit]
        offsets[which[field == 5]] = 0
        live = pos < ends
        which, pos, ends = which[live], pos[live], ends[live]
    return False


def decode(buf, start: int, end: int):
    """(bytes read, (ids, offsets, durations, events)) of the run of whole event fields from
    buf[start:end], decoded with numpy; None where protobuf's parser must read it."""
    n = end - start
    data = bytearray(n + _PAD)
    data[:n] = buf[start:end]
    a = np.frombuffer(data, dtype=np.uint8)
    framed = _frame(a, n)
    if framed is None:
        return None
    starts, ends, run = framed
    words = np.ndarray((len(data) - 7,), dtype="<u8", buffer=data, strides=(1,))
    fields = _event_fields(a, words, starts, ends)
    if fields is None:
        return None
    return run, (*fields, LazyEvents(data, starts, ends, run))


class LazyEvents:
    """The events of a decoded run, parsed by protobuf only when their stats are asked for: one
    event at a time for a few, the whole run once many are."""
    __slots__ = ("_data", "_starts", "_ends", "_run", "parsed", "_reads")

    def __init__(self, data: bytearray, starts: np.ndarray, ends: np.ndarray, run: int):
        self._data, self._starts, self._ends, self._run = data, starts, ends, run
        self.parsed, self._reads = None, 0

    def __getitem__(self, i: int):
        if self.parsed is None:
            self._reads += 1
            if self._reads <= max(_LAZY_READS, len(self._starts) >> 5):
                return parse(XEvent, bytes(self._data[int(self._starts[i]):int(self._ends[i])]))
            self.parsed = parse(XLine, bytes(self._data[:self._run])).events
        return self.parsed[i]

    def __len__(self) -> int:
        return len(self._starts)
