"""Read an XSpace file plane by plane, line by line, events in chunks, without holding it parsed.

`jax.profiler.ProfileData` parses the whole file into memory (about 11 bytes per byte of
trace) and cannot parse a file over 2 GiB. Here the file is memory-mapped and only the
framing of the top-level messages is walked in Python (xplane.proto field numbers, see
../shared/GPU_XPLANE_SCHEMA.md): each plane's metadata is parsed once, and each line's
events are decoded a chunk at a time with numpy, straight from the bytes (`_decode`: ids,
offsets and durations as columns; an event's stats parsed by protobuf when asked for), or,
where that declines, parsed by protobuf's C parser (a run of whole `events = 4` fields is
itself a valid XLine). The objects given out have ProfileData's interface
(`planes`, `find_plane_with_name`, `name`, `lines`, `events`, `stats`, `start_ns`,
`duration_ns`) and its values, so the timeline reader takes either.
"""

from __future__ import annotations

import mmap
import os
from array import array
from itertools import chain
from operator import attrgetter
from typing import Iterator, Optional

import numpy as np

from google.protobuf.message import DecodeError

from .protos import message_class
from .xspace_slice import _skip, _varint

_SCHEMA = """
name: "advisor_xplane_stream.proto"
package: "advisor_xplane"
syntax: "proto3"
message_type {
  name: "XStat"
  field { name: "metadata_id" number: 1 label: LABEL_OPTIONAL type: TYPE_INT64 }
  field { name: "double_value" number: 2 label: LABEL_OPTIONAL type: TYPE_DOUBLE oneof_index: 0 }
  field { name: "uint64_value" number: 3 label: LABEL_OPTIONAL type: TYPE_UINT64 oneof_index: 0 }
  field { name: "int64_value" number: 4 label: LABEL_OPTIONAL type: TYPE_INT64 oneof_index: 0 }
  field { name: "str_value" number: 5 label: LABEL_OPTIONAL type: TYPE_STRING oneof_index: 0 }
  field { name: "bytes_value" number: 6 label: LABEL_OPTIONAL type: TYPE_BYTES oneof_index: 0 }
  field { name: "ref_value" number: 7 label: LABEL_OPTIONAL type: TYPE_UINT64 oneof_index: 0 }
  oneof_decl { name: "value" }
}
message_type {
  name: "XEvent"
  field { name: "metadata_id" number: 1 label: LABEL_OPTIONAL type: TYPE_INT64 }
  field { name: "offset_ps" number: 2 label: LABEL_OPTIONAL type: TYPE_INT64 oneof_index: 0 }
  field { name: "num_occurrences" number: 5 label: LABEL_OPTIONAL type: TYPE_INT64 oneof_index: 0 }
  field { name: "duration_ps" number: 3 label: LABEL_OPTIONAL type: TYPE_INT64 }
  field { name: "stats" number: 4 label: LABEL_REPEATED type: TYPE_MESSAGE type_name: ".advisor_xplane.XStat" }
  oneof_decl { name: "data" }
}
message_type {
  name: "XLine"
  field { name: "name" number: 2 label: LABEL_OPTIONAL type: TYPE_STRING }
  field { name: "timestamp_ns" number: 3 label: LABEL_OPTIONAL type: TYPE_INT64 }
  field { name: "events" number: 4 label: LABEL_REPEATED type: TYPE_MESSAGE type_name: ".advisor_xplane.XEvent" }
}
message_type {
  name: "XEventMetadata"
  field { name: "id" number: 1 label: LABEL_OPTIONAL type: TYPE_INT64 }
  field { name: "name" number: 2 label: LABEL_OPTIONAL type: TYPE_STRING }
}
message_type {
  name: "XStatMetadata"
  field { name: "id" number: 1 label: LABEL_OPTIONAL type: TYPE_INT64 }
  field { name: "name" number: 2 label: LABEL_OPTIONAL type: TYPE_STRING }
}
message_type {
  name: "XPlane"
  field { name: "id" number: 1 label: LABEL_OPTIONAL type: TYPE_INT64 }
  field { name: "name" number: 2 label: LABEL_OPTIONAL type: TYPE_STRING }
  field { name: "event_metadata" number: 4 label: LABEL_REPEATED type: TYPE_MESSAGE type_name: ".advisor_xplane.XPlane.EventMetadataEntry" }
  field { name: "stat_metadata" number: 5 label: LABEL_REPEATED type: TYPE_MESSAGE type_name: ".advisor_xplane.XPlane.StatMetadataEntry" }
  field { name: "stats" number: 6 label: LABEL_REPEATED type: TYPE_MESSAGE type_name: ".advisor_xplane.XStat" }
  nested_type {
    name: "EventMetadataEntry"
    field { name: "key" number: 1 label: LABEL_OPTIONAL type: TYPE_INT64 }
    field { name: "value" number: 2 label: LABEL_OPTIONAL type: TYPE_MESSAGE type_name: ".advisor_xplane.XEventMetadata" }
    options { map_entry: true }
  }
  nested_type {
    name: "StatMetadataEntry"
    field { name: "key" number: 1 label: LABEL_OPTIONAL type: TYPE_INT64 }
    field { name: "value" number: 2 label: LABEL_OPTIONAL type: TYPE_MESSAGE type_name: ".advisor_xplane.XStatMetadata" }
    options { map_entry: true }
  }
}
"""

XLine = message_class(_SCHEMA, "advisor_xplane.XLine")
XEvent = message_class(_SCHEMA, "advisor_xplane.XEvent")
XPlaneHead = message_class(_SCHEMA, "advisor_xplane.XPlane")   # a plane without its lines

_PLANES, _LINES, _EVENTS = 1, 3, 4
_LEN = 2
_CHUNK = 512 << 10   # bytes of event fields decoded at once: bounds the memory of one chunk (the decoder's
                     # arrays stay in cache: analyze's CPU time on a 79 MB trace 1.74 s at 512 KB, 1.96 s at 2 MB)
                   # memory than 8 MB and faster, measured on a 90 MB trace: 119 vs 194 MiB, 1.85 vs 2.60 s)


class XSpaceError(ValueError):
    """The file is not a readable XSpace (truncated, corrupt, or not a trace)."""


def int_stat(value, name: str, default: int = 0) -> int:
    """A stat that must be an integer; one that is not (a corrupt stat id naming another stat, as the
    trace fuzzer found) makes the trace unreadable, one clear error, instead of a ValueError from int()."""
    if value is None or value == "":
        return default
    try:
        return int(value)
    except (TypeError, ValueError):
        raise XSpaceError(f"a {name} stat is not a number ({str(value)[:60]!r})") from None


def _fields(buf, pos: int, end: int) -> Iterator[tuple[int, int, int, int, int]]:
    """(field, wire, field_start, body_start, field_end) of each field in buf[pos:end]."""
    while pos < end:
        start = pos
        try:
            key, pos = _varint(buf, pos)
            field, wire = key >> 3, key & 7
            if wire == _LEN:
                length, body = _varint(buf, pos)
                pos = body + length
            else:
                body = pos
                pos = _skip(buf, pos, wire)
        except (IndexError, ValueError):
            raise XSpaceError("truncated or malformed field") from None
        if pos > end or field == 0:
            raise XSpaceError("truncated or malformed field")
        yield field, wire, start, body, pos


def _stat_tuple(stat, stat_names: dict) -> tuple:
    """(name, value) as ProfileData gives it: refs resolved, unknown metadata ids (None, None)."""
    name = stat_names.get(stat.metadata_id)
    if name is None:
        return (None, None)
    kind = stat.WhichOneof("value")
    if kind == "ref_value":
        return (name, stat_names.get(stat.ref_value, ""))
    if kind is None:
        return (None, None)
    return (name, getattr(stat, kind))


class StreamEvent:
    __slots__ = ("name", "start_ns", "duration_ns", "_event", "_stat_names")

    def __init__(self, name, start_ns, duration_ns, event, stat_names):
        self.name = name
        self.start_ns = start_ns
        self.duration_ns = duration_ns
        self._event = event
        self._stat_names = stat_names

    @property
    def stats(self) -> Iterator[tuple]:
        names = self._stat_names
        return (_stat_tuple(s, names) for s in self._event.stats)


def _wanted_stats(event, names: dict, wanted: frozenset) -> dict:
    out = {}
    for stat in event.stats:
        name = names.get(stat.metadata_id)
        if name in wanted:
            kind = stat.WhichOneof("value")
            if kind == "ref_value":
                out[name] = names.get(stat.ref_value, "")
            elif kind is not None:
                out[name] = getattr(stat, kind)
    return out


_EVENT_TAG = _EVENTS << 3 | _LEN


def _event_run(buf, pos: int, end: int) -> int:
    """The end of the run of whole `events` fields from pos, at most _CHUNK bytes (but at least
    one field) and never past end. Most events are shorter than 128 bytes: a one-byte length,
    read inline."""
    limit, first = min(end, pos + _CHUNK), True
    try:
        while pos < limit and buf[pos] == _EVENT_TAG:
            length = buf[pos + 1]
            if length < 0x80:
                nxt = pos + 2 + length
            else:
                length, body = _varint(buf, pos + 1)
                nxt = body + length
            if nxt > limit and not first:
                break
            pos, first = nxt, False
    except (IndexError, ValueError):
        raise XSpaceError("truncated event") from None
    if pos > end:
        raise XSpaceError("truncated event")
    return pos


def _ns(ps: int) -> int:
    """ps // 1000 truncated toward zero, as ProfileData's int64 division does."""
    return ps // 1000 if ps >= 0 else -((-ps) // 1000)


class StreamLine:
    """One line: its name and timestamp read now (writers put them before the events), its
    events only when asked for, so a pass that skips the line never parses or walks them."""

    def __init__(self, plane: "StreamPlane", start: int, end: int):
        self._plane, self._start, self._end = plane, start, end
        buf = plane._buf
        head = bytearray()
        pos = start
        while pos < end and buf[pos] != _EVENT_TAG:
            _, _, fstart, _, fend = next(_fields(buf, pos, end))
            head += buf[fstart:fend]
            pos = fend
        self._events_at = pos
        msg = _parse(XLine, bytes(head))
        if not msg.name and pos < end:    # not written in field order: read every non-event field
            msg = _parse(XLine, bytes(self._walk()[1]))
        self.name, self.timestamp_ns = msg.name, msg.timestamp_ns

    def _walk(self) -> tuple[list[tuple[int, int]], bytearray]:
        """[start, end) of the runs of whole event fields (at most _CHUNK bytes each), and the
        line's other fields."""
        buf, end = self._plane._buf, self._end
        runs, head = [], bytearray()
        pos = self._start
        while pos < end:
            if buf[pos] == _EVENT_TAG:
                run_end = _event_run(buf, pos, end)
                if run_end > pos:
                    runs.append((pos, run_end))
                    pos = run_end
                    continue
            _, _, fstart, _, fend = next(_fields(buf, pos, end))
            head += buf[fstart:fend]
            pos = fend
        return runs, head

    def _messages(self):
        """The line's events as XLine messages of at most _CHUNK bytes of events each (a small
        line: the rest of it, parsed at once, with no walk over its events)."""
        buf = self._plane._buf
        if self._end - self._events_at <= _CHUNK:
            return [_chunk(buf, self._events_at, self._end)] if self._end > self._events_at else []
        return (_chunk(buf, s, e) for s, e in self._runs())

    def _runs(self) -> Iterator[tuple[int, int]]:
        """The runs of whole event fields, found as they are parsed: walking the whole line
        first would bring all of its pages into memory at once."""
        buf, end = self._plane._buf, self._end
        pos = self._events_at
        while pos < end:
            if buf[pos] == _EVENT_TAG:
                run_end = _event_run(buf, pos, end)
                if run_end > pos:
                    yield pos, run_end
                    pos = run_end
                    continue
            pos = next(_fields(buf, pos, end))[4]

    @property
    def events(self) -> Iterator[StreamEvent]:
        names, stat_names = self._plane._event_names, self._plane._stat_names
        ts = self.timestamp_ns
        for chunk in self._messages():
            for ev in chunk.events:
                off, dur = ev.offset_ps, ev.duration_ps
                yield StreamEvent(names.get(ev.metadata_id, ""),
                                  float((off // 1000 if off >= 0 else _ns(off)) + ts),
                                  float(dur // 1000 if dur >= 0 else _ns(dur)), ev, stat_names)

    def chunks(self, all_stats: bool = False) -> Iterator[Chunk]:
        """The line's events as columns, a chunk (at most _CHUNK bytes of events) at a time; with
        all_stats (a reader that reads every event's stats), each chunk's events parsed at once."""
        ts = self.timestamp_ns
        names, stat_names = self._plane._event_names, self._plane._stat_names
        for ids, offsets, durations, events in self._columns(all_stats):
            if len(ids):
                yield Chunk(ids, (_ns_array(offsets) + ts).astype(np.float64),
                            _ns_array(durations).astype(np.float64), events, names, stat_names)

    def _columns(self, all_stats: bool = False):
        """(metadata ids, offsets, durations, events) of each run of whole event fields: decoded
        from the bytes with numpy (`_decode`), or by protobuf's parser for a short line, for a
        reader of every event's stats (which needs the events parsed: numpy's pass would be on top
        of that) and where the decoder declines (an event larger than a chunk, a group, damage);
        protobuf's parser also raises on damage."""
        buf, end = self._plane._buf, self._end
        pos = self._events_at
        while pos < end:
            if buf[pos] != _EVENT_TAG:
                pos = next(_fields(buf, pos, end))[4]
                continue
            window = min(end, pos + _CHUNK)
            decoded = _decode(buf, pos, window) if window - pos >= _SMALL_RUN and not all_stats else None
            if decoded is not None:
                run, columns = decoded
                _release(buf, pos, pos + run)
                yield columns
                pos += run
                continue
            run_end = _event_run(buf, pos, end)
            events = _chunk(buf, pos, run_end).events
            cols = np.fromiter(_chain(map(_EVENT_FIELDS, events)), dtype=np.int64,
                               count=3 * len(events)).reshape(-1, 3)
            yield cols[:, 0], cols[:, 1], cols[:, 2], events
            pos = run_end


_EVENT_FIELDS = attrgetter("metadata_id", "offset_ps", "duration_ps")
_chain = chain.from_iterable


def _ns_array(ps):
    """ps // 1000 truncated toward zero, as ProfileData's int64 division does."""
    ns = ps // 1000
    negative = ps < 0
    if negative.any():
        ns[negative] = -((-ps[negative]) // 1000)
    return ns


_SMALL_RUN = 16 << 10    # bytes of events under which protobuf's parser is cheaper than numpy's fixed cost
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
    np.equal(a[:n], _EVENT_TAG, out=is_tag[:n])
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
        stat = a[pos] == _EVENT_TAG
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
        varint, nested = wire == 0, wire == _LEN
        if (~width.astype(bool) & (varint | nested)).any():
            return False
        scalar = (field == 1) | (field == 2) | (field == 3) | (field == 5)
        if (scalar & ~varint).any() or ((field == _EVENTS) & ~nested).any():
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


def _decode(buf, start: int, end: int):
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
    return run, (*fields, _LazyEvents(data, starts, ends, run))


class _LazyEvents:
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
                return _parse(XEvent, bytes(self._data[int(self._starts[i]):int(self._ends[i])]))
            self.parsed = _parse(XLine, bytes(self._data[:self._run])).events
        return self.parsed[i]

    def __len__(self) -> int:
        return len(self._starts)


class Chunk:
    """Consecutive events of one line as columns: metadata ids, start and duration in ns; the
    stats of an event are read only when asked for (by its position in the chunk)."""
    __slots__ = ("ids", "start_ns", "dur_ns", "_events", "names", "_stat_names")

    def __init__(self, ids, start_ns, dur_ns, events, names: dict, stat_names: dict):
        self.ids, self.start_ns, self.dur_ns = ids, start_ns, dur_ns
        self._events, self.names, self._stat_names = events, names, stat_names

    def __len__(self) -> int:
        return len(self.ids)

    def stats(self, i: int, wanted: frozenset) -> dict:
        return _wanted_stats(self._event(i), self._stat_names, wanted)

    def stat_items(self, i: int) -> Iterator[tuple]:
        names = self._stat_names
        return (_stat_tuple(s, names) for s in self._event(i).stats)

    def _event(self, i: int):
        events = self._events
        if events.__class__ is not _LazyEvents:
            return events[i]
        event = events[i]
        if events.parsed is not None:     # the whole run is parsed now: read it directly from here on
            self._events = events.parsed
        return event


def _chunk(buf, start: int, end: int):
    msg = _parse(XLine, buf[start:end])
    _release(buf, start, end)
    return msg


_PAGE = mmap.PAGESIZE


def _release(buf, start: int, end: int) -> None:
    """Drop the file's pages already parsed from this process's RSS (the page cache keeps
    them): without it the mapped file counts in the peak RSS as it is read."""
    if isinstance(buf, mmap.mmap) and hasattr(mmap, "MADV_DONTNEED"):
        first = -(-start // _PAGE) * _PAGE
        last = end // _PAGE * _PAGE
        if last > first:
            buf.madvise(mmap.MADV_DONTNEED, first, last - first)


def _parse(cls, data):
    msg = cls()
    try:
        msg.ParseFromString(data)
    except DecodeError as err:
        raise XSpaceError(f"bad message: {err}") from None
    return msg


_EVENT_METADATA, _STAT_METADATA = 4, 5
BIG_TABLE = 200_000   # metadata entries past which a plane's names are kept in arrays, not a dict


class NameTable:
    """id -> name for a metadata table too large for a dict of Python objects (about 140 bytes an
    entry, where the file spends 20 to 30): ids sorted in an array, names in one UTF-8 blob, a name
    decoded when first asked for. Only `get` is offered: it is all the readers of the tables use."""

    def __init__(self, ids: np.ndarray, starts: np.ndarray, ends: np.ndarray, blob: bytes):
        order = np.argsort(ids, kind="stable")      # equal ids keep their order: the last one wins
        self._ids, self._starts, self._ends = ids[order], starts[order], ends[order]
        self._blob = blob
        self._cache: dict = {}

    def get(self, key, default=None):
        try:
            return self._cache[key]
        except KeyError:
            pass
        i = int(np.searchsorted(self._ids, key, side="right")) - 1    # the last of equal ids, as a map keeps
        if i < 0 or self._ids[i] != key:
            return default
        name = self._cache[key] = self._blob[int(self._starts[i]):int(self._ends[i])].decode("utf-8", "replace")
        return name

    def __len__(self) -> int:
        return len(self._ids)


class _Names:
    """A plane's event or stat metadata names, gathered a run of entries at a time: a dict while small,
    arrays (8 bytes an id, 16 for where its name lies) and one blob of names once past BIG_TABLE."""

    def __init__(self):
        self.small: Optional[dict] = {}
        self.ids, self.starts, self.ends = array("q"), array("q"), array("q")
        self.blob = bytearray()

    def add(self, pairs) -> None:
        if self.small is not None:
            self.small.update(pairs)
            if len(self.small) <= BIG_TABLE:
                return
            pairs, self.small = list(self.small.items()), None
        for key, name in pairs:
            self.ids.append(key)
            self.starts.append(len(self.blob))
            self.blob += name.encode("utf-8", "surrogatepass")
            self.ends.append(len(self.blob))

    def table(self):
        if self.small is not None:
            return self.small
        return NameTable(np.frombuffer(self.ids, dtype=np.int64), np.frombuffer(self.starts, dtype=np.int64),
                         np.frombuffer(self.ends, dtype=np.int64), bytes(self.blob))


class StreamPlane:
    def __init__(self, buf, start: int, end: int):
        self._buf = buf
        self._lines: list[tuple[int, int]] = []
        head = bytearray()
        events, stats = _Names(), _Names()
        run = None       # [start, end) of consecutive metadata entries, parsed _CHUNK bytes at a time

        def flush(run):
            # parsed alone, a run of entries is small: the plane's metadata is never all parsed at once
            msg = _parse(XPlaneHead, buf[run[0]:run[1]])
            events.add((k, v.name) for k, v in msg.event_metadata.items())
            stats.add((k, v.name) for k, v in msg.stat_metadata.items())

        for field, wire, fstart, body, fend in _fields(buf, start, end):
            if field == _LINES and wire == _LEN:
                self._lines.append((body, fend))
            elif field in (_EVENT_METADATA, _STAT_METADATA) and wire == _LEN:
                if run is not None and run[1] == fstart and fend - run[0] <= _CHUNK:
                    run[1] = fend
                else:
                    if run is not None:
                        flush(run)
                    run = [fstart, fend]
            else:
                head += buf[fstart:fend]
        if run is not None:
            flush(run)
        msg = _parse(XPlaneHead, bytes(head))
        self.name = msg.name
        self._event_names = events.table()
        self._stat_names = stats.table()
        self._stats = [_stat_tuple(s, self._stat_names) for s in msg.stats]

    @property
    def stats(self) -> Iterator[tuple]:
        return iter(self._stats)

    @property
    def lines(self) -> Iterator[StreamLine]:
        for start, end in self._lines:
            yield StreamLine(self, start, end)


class StreamSpace:
    """An XSpace file read lazily: the planes are indexed now, parsed when visited."""

    def __init__(self, path):
        size = os.path.getsize(path)
        self._buf = b""
        if size:
            with open(path, "rb") as f:
                self._buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        self._planes: list[tuple[int, int, str]] = []
        for field, wire, _, body, fend in _fields(self._buf, 0, size):
            if field == _PLANES and wire == _LEN:
                self._planes.append((body, fend, _plane_name(self._buf, body, fend)))

    @property
    def planes(self) -> Iterator[StreamPlane]:
        for start, end, _ in self._planes:
            yield StreamPlane(self._buf, start, end)

    def planes_named(self, prefixes: tuple) -> list[StreamPlane]:
        """The planes whose names start with one of prefixes; the others are not parsed."""
        return [StreamPlane(self._buf, s, e) for s, e, name in self._planes if name.startswith(prefixes)]

    def find_plane_with_name(self, name: str) -> Optional[StreamPlane]:
        for start, end, plane_name in self._planes:
            if plane_name == name:
                return StreamPlane(self._buf, start, end)
        return None

    def plane_names(self) -> list[str]:
        return [name for _, _, name in self._planes]


def _plane_name(buf, start: int, end: int) -> str:
    """The plane's `name = 2`: writers put it right after `id = 1`, so the plane's other fields
    (its lines and metadata, most of its bytes) are not walked."""
    name = b""
    for field, wire, _, body, fend in _fields(buf, start, end):
        if field == 2 and wire == _LEN:
            name = bytes(buf[body:fend])
            break
    try:
        return name.decode("utf-8")
    except UnicodeDecodeError:
        raise XSpaceError("plane name is not UTF-8") from None
