"""What cannot be a trace, told from its first bytes, before anything reads the rest.

An `.xplane.pb` is a serialized XSpace: a protobuf message, so it starts with a field's tag (a varint
of field number and wire type) and every field XSpace has (planes, errors, warnings, host names) is
length-delimited. A file of zero bytes starts with field number 0, which protobuf never writes; a
length past the end of the file is no message either. Without this check such a file reached the
readers: a 256 MiB file of zeros took 32 s before "cannot parse", while xprof's child grew on it.
"""

from __future__ import annotations

import os

from .errors import AdvisorError
from .load.wire import varint

_WIRE_TYPES = {0: "varint", 1: "64-bit", 2: "length-delimited", 5: "32-bit"}   # 3, 4: groups; 6, 7: none


def _varint(data: bytes, at: int) -> tuple[int, int]:
    """(value, next offset); ValueError if the bytes end inside it or it runs past 10 bytes."""
    try:
        return varint(data, at)
    except IndexError:
        raise ValueError from None


def check_trace_head(path) -> None:
    """AdvisorError unless the file's first field could begin an XSpace. An empty file passes: the
    loader says that it is empty."""
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            head = f.read(32)
    except OSError:
        return          # the loader reports what cannot be opened, as it always has
    if not head:
        return
    why = _why(head, size)
    if why:
        raise AdvisorError(f"{path}: not a trace (a serialized XSpace): {why}; record the trace again")


def _why(head: bytes, size: int) -> str:
    if head.startswith(b"\x1f\x8b"):
        return "it is gzip-compressed (decompress it first: gunzip)"
    try:
        tag, at = _varint(head, 0)
    except ValueError:
        return f"its first bytes ({head[:10].hex(' ')}) are no protobuf field tag"
    number, wire = tag >> 3, tag & 7
    if number == 0:
        what = "zero bytes" if not any(head) else f"byte 0x{head[0]:02x}"
        return f"it starts with {what}, field number 0, which no protobuf message holds"
    if wire not in _WIRE_TYPES:
        return f"its first field (number {number}) has wire type {wire}, which XSpace never writes"
    if wire == 2:
        try:
            length, at = _varint(head, at)
        except ValueError:
            return f"its first field's length ({head[at:at + 10].hex(' ')}) is no varint"
        if at + length > size:
            return (f"its first field claims {length:,} bytes, past the end of the file ({size:,} bytes): "
                    "it is truncated or corrupt")
    return ""
