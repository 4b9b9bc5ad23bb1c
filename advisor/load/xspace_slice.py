"""Cut an XSpace file down to the planes xprof's HLO tools need, and read the programs' HLO there.

xprof's `tool_names` and `memory_viewer` parse the whole XSpace to find the HLO protos of
the `/host:metadata` plane; on a 100 MB trace that is most of their time. The top level of
an XSpace is a list of length-prefixed planes and host names (advisor/load/xplane.py), so we
copy the metadata plane and the host names into a small XSpace without decoding the timeline
planes at all. There each program is an `event_metadata` map entry named `name(program_id)`,
its HloProto the bytes value of one of its stats.
"""

from __future__ import annotations

import mmap
from pathlib import Path
from typing import Iterator

from .wire import LEN, field_value, fields, messages
from .xplane import (
    EVENT_METADATA_NAME,
    EVENT_METADATA_STATS,
    MAP_VALUE,
    METADATA_PLANE,
    PLANE_EVENT_METADATA,
    STAT_BYTES_VALUE,
    XSPACE_HOSTNAMES,
    XSPACE_PLANES,
    metadata_plane,
    plane_name,
)


def metadata_xspace(path: Path) -> bytes:
    """A serialized XSpace holding only the metadata plane and the host names of `path`."""
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        out = bytearray()
        for number, wire, start, body, end in fields(buf, 0, len(buf)):
            if wire == LEN and (number == XSPACE_HOSTNAMES or
                                (number == XSPACE_PLANES and plane_name(buf, body, end) == METADATA_PLANE)):
                out += buf[start:end]
        return bytes(out)


def _programs(xspace: bytes) -> Iterator[tuple[str, int, int]]:
    """(name(program_id), start, end of its XEventMetadata) of each program of the metadata plane."""
    plane = metadata_plane(xspace)
    if plane is None:
        return
    for number, entry, stop in messages(xspace, plane[1], plane[2]):
        value = field_value(xspace, entry, stop, MAP_VALUE) if number == PLANE_EVENT_METADATA else None
        if value is not None:
            name = field_value(xspace, *value, EVENT_METADATA_NAME)
            yield (bytes(xspace[name[0]:name[1]]).decode("utf-8", "replace") if name else ""), *value


def program_names(xspace: bytes) -> list[str]:
    """The metadata plane's programs as `name(program_id)`, the keys the HLO files are named by."""
    return [name for name, _, _ in _programs(xspace)]


def program_protos(xspace: bytes, wanted: set[str]) -> dict[str, bytes]:
    """The serialized HloProto of each program named in `wanted` (`name(program_id)`)."""
    out = {}
    for name, start, end in _programs(xspace):
        if name in wanted:
            data = [bytes(xspace[b:e]) for n, s0, s1 in messages(xspace, start, end) if n == EVENT_METADATA_STATS
                    for g, b, e in messages(xspace, s0, s1) if g == STAT_BYTES_VALUE]
            if data:
                out[name] = data[0]
    return out
