"""Read an XSpace file plane by plane, line by line, events in chunks, without holding it parsed.

`jax.profiler.ProfileData` parses the whole file into memory (about 11 bytes per byte of
trace) and cannot parse a file over 2 GiB. Here the file is memory-mapped and only the
framing of the top-level messages is walked in Python (xplane.proto field numbers, see
../shared/GPU_XPLANE_SCHEMA.md): each plane's metadata is parsed once, and each line's
events are decoded a chunk at a time with numpy, straight from the bytes (`event_decoder`: ids,
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

from . import event_decoder, xplane
from .wire import LEN, WireError, varint
from .wire import fields as _fields
from .xplane import EVENT_TAG, PLANE_EVENT_METADATA, PLANE_LINES, PLANE_STAT_METADATA, XLine, XPlane
from .xplane import parse as _parse

_CHUNK = 512 << 10   # bytes of event fields decoded at once: bounds the memory of one chunk (the decoder's
                     # arrays stay in cache: analyze's CPU time on a 79 MB trace 1.74 s at 512 KB, 1.96 s at 2 MB)

# The file is not a readable XSpace (truncated, corrupt, or not a trace): every error of the wire
# format, of protobuf's parser and of the stream's own checks is this one.
XSpaceError = WireError


def int_stat(value, name: str, default: int = 0) -> int:
    """A stat that must be an integer; one that is not (a corrupt stat id naming another stat, as the
    trace fuzzer found) makes the trace unreadable, one clear error, instead of a ValueError from int()."""
    if value is None or value == "":
        return default
    try:
        return int(value)
    except (TypeError, ValueError):
        raise XSpaceError(f"a {name} stat is not a number ({str(value)[:60]!r})") from None


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


def _event_run(buf, pos: int, end: int) -> int:
    """The end of the run of whole `events` fields from pos, at most _CHUNK bytes (but at least
    one field) and never past end. Most events are shorter than 128 bytes: a one-byte length,
    read inline."""
    limit, first = min(end, pos + _CHUNK), True
    try:
        while pos < limit and buf[pos] == EVENT_TAG:
            length = buf[pos + 1]
            if length < 0x80:
                nxt = pos + 2 + length
            else:
                length, body = varint(buf, pos + 1)
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
        while pos < end and buf[pos] != EVENT_TAG:
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
            if buf[pos] == EVENT_TAG:
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
            if buf[pos] == EVENT_TAG:
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
        from the bytes with numpy (`event_decoder.decode`), or by protobuf's parser for a short line, for a
        reader of every event's stats (which needs the events parsed: numpy's pass would be on top
        of that) and where the decoder declines (an event larger than a chunk, a group, damage);
        protobuf's parser also raises on damage."""
        buf, end = self._plane._buf, self._end
        pos = self._events_at
        while pos < end:
            if buf[pos] != EVENT_TAG:
                pos = next(_fields(buf, pos, end))[4]
                continue
            window = min(end, pos + _CHUNK)
            decoded = event_decoder.decode(buf, pos, window) if window - pos >= _SMALL_RUN and not all_stats else None
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
        if events.__class__ is not event_decoder.LazyEvents:
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
            msg = _parse(XPlane, buf[run[0]:run[1]])
            events.add((k, v.name) for k, v in msg.event_metadata.items())
            stats.add((k, v.name) for k, v in msg.stat_metadata.items())

        for field, wire, fstart, body, fend in _fields(buf, start, end):
            if field == PLANE_LINES and wire == LEN:
                self._lines.append((body, fend))
            elif field in (PLANE_EVENT_METADATA, PLANE_STAT_METADATA) and wire == LEN:
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
        msg = _parse(XPlane, bytes(head))
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
        self._planes = [(body, end, _name(xplane.plane_name(self._buf, body, end)))
                        for _, body, end in xplane.planes(self._buf)]

    @property
    def planes(self) -> Iterator[StreamPlane]:
        for start, end, _ in self._planes:
            yield StreamPlane(self._buf, start, end)

    def planes_named(self, prefixes: tuple) -> list[StreamPlane]:
        """The planes whose names start with one of prefixes; the others are not parsed."""
        return [StreamPlane(self._buf, s, e) for s, e, name in self._planes if name.startswith(prefixes)]

    def find_plane_with_name(self, name: str) -> Optional[StreamPlane]:
        for start, end, named in self._planes:
            if named == name:
                return StreamPlane(self._buf, start, end)
        return None

    def plane_names(self) -> list[str]:
        return [name for _, _, name in self._planes]


def _name(name: bytes) -> str:
    try:
        return name.decode("utf-8")
    except UnicodeDecodeError:
        raise XSpaceError("plane name is not UTF-8") from None
