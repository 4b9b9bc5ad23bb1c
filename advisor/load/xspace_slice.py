"""Cut an XSpace file down to the planes xprof's HLO tools need.

xprof's `tool_names` and `memory_viewer` parse the whole XSpace to find the HLO protos of
the `/host:metadata` plane; on a 100 MB trace that is most of their time. The top level of
an XSpace is a list of length-prefixed planes (`planes = 1`, `hostnames = 4` in
xplane.proto), so we copy the metadata plane and the host names into a small XSpace
without decoding the timeline planes at all.
"""

from __future__ import annotations

import mmap
from pathlib import Path

_PLANES, _HOSTNAMES = 1, 4
_LEN = 2  # wire type: length-delimited
_KEEP_PLANES = (b"/host:metadata",)


def _varint(buf, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise ValueError("bad varint")


def _skip(buf, pos: int, wire: int) -> int:
    if wire == 0:
        return _varint(buf, pos)[1]
    if wire == 1:
        return pos + 8
    if wire == _LEN:
        length, pos = _varint(buf, pos)
        return pos + length
    if wire == 5:
        return pos + 4
    raise ValueError(f"unsupported wire type {wire}")


def _plane_name(buf, start: int, end: int) -> bytes:
    """The plane's `name = 2` field; it comes right after `id = 1` in serialized planes."""
    pos = start
    while pos < end:
        key, pos = _varint(buf, pos)
        field, wire = key >> 3, key & 7
        if field == 2 and wire == _LEN:
            length, pos = _varint(buf, pos)
            return bytes(buf[pos:pos + length])
        pos = _skip(buf, pos, wire)
    return b""


def metadata_xspace(path: Path) -> bytes:
    """A serialized XSpace holding only the metadata plane and the host names of `path`."""
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        out = bytearray()
        pos, end = 0, len(buf)
        while pos < end:
            field_start = pos
            key, pos = _varint(buf, pos)
            field, wire = key >> 3, key & 7
            if wire != _LEN:
                pos = _skip(buf, pos, wire)
                continue
            length, body = _varint(buf, pos)
            pos = body + length
            if pos > end:
                raise ValueError("truncated XSpace")
            if field == _HOSTNAMES or (field == _PLANES and _plane_name(buf, body, pos) in _KEEP_PLANES):
                out += buf[field_start:pos]
        return bytes(out)


def program_names(xspace: bytes) -> list[str]:
    """The metadata plane's programs as `name(program_id)`, the keys the HLO files are named by:
    each `event_metadata = 4` map entry's value (`XEventMetadata`, its `name = 2`)."""
    names, pos, end = [], 0, len(xspace)
    while pos < end:
        key, pos = _varint(xspace, pos)
        field, wire = key >> 3, key & 7
        if wire != _LEN:
            pos = _skip(xspace, pos, wire)
            continue
        length, body = _varint(xspace, pos)
        pos = body + length
        if field == _PLANES and _plane_name(xspace, body, min(pos, end)) in _KEEP_PLANES:
            inner = body
            while inner < min(pos, end):
                k, inner = _varint(xspace, inner)
                if k >> 3 == 4 and k & 7 == _LEN:
                    length, entry = _varint(xspace, inner)
                    names.append(_entry_name(xspace, entry, entry + length))
                inner = _skip(xspace, inner, k & 7)
    return names


def program_protos(xspace: bytes, wanted: set[str]) -> dict[str, bytes]:
    """The serialized HloProto of each program named in `wanted` (`name(program_id)`): the bytes
    stat of its metadata entry (`XEventMetadata.stats = 5`, `XStat.bytes_value = 6`)."""
    out, pos, end = {}, 0, len(xspace)
    while pos < end:
        key, pos = _varint(xspace, pos)
        if key & 7 != _LEN:
            pos = _skip(xspace, pos, key & 7)
            continue
        length, body = _varint(xspace, pos)
        pos = body + length
        if key >> 3 != _PLANES or _plane_name(xspace, body, min(pos, end)) not in _KEEP_PLANES:
            continue
        for number, entry, stop in _fields(xspace, body, min(pos, end)):
            if number != 4:
                continue
            for n, value, value_end in _fields(xspace, entry, stop):
                if n == 2 and _entry_name(xspace, entry, stop) in wanted:
                    data = [bytes(xspace[b:e]) for f, s0, s1 in _fields(xspace, value, value_end) if f == 5
                            for g, b, e in _fields(xspace, s0, s1) if g == 6]
                    if data:
                        out[_entry_name(xspace, entry, stop)] = data[0]
    return out


def _fields(buf, pos: int, end: int):
    """(field number, body start, body end) of each length-delimited field in buf[pos:end]."""
    while pos < end:
        key, pos = _varint(buf, pos)
        if key & 7 != _LEN:
            pos = _skip(buf, pos, key & 7)
            continue
        length, body = _varint(buf, pos)
        yield key >> 3, body, body + length
        pos = body + length


def _entry_name(buf, pos: int, end: int) -> str:
    """A map entry's `value = 2` (XEventMetadata), then its `name = 2`."""
    while pos < end:
        key, pos = _varint(buf, pos)
        if key >> 3 == 2 and key & 7 == _LEN:
            length, body = _varint(buf, pos)
            inner, stop = body, body + length
            while inner < stop:
                k, inner = _varint(buf, inner)
                if k >> 3 == 2 and k & 7 == _LEN:
                    n, start = _varint(buf, inner)
                    return bytes(buf[start:start + n]).decode("utf-8", "replace")
                inner = _skip(buf, inner, k & 7)
            return ""
        pos = _skip(buf, pos, key & 7)
    return ""
