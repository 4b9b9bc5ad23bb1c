"""Protobuf's wire format, for the readers that walk serialized messages without parsing them whole.

A message is a run of fields, each a key (a varint of the field number and the wire type) and a
value: a varint, 8 or 4 bytes, or (length-delimited: messages, strings, bytes) a varint length
and that many bytes. The XSpace's planes and lines (xplane_stream, xspace_slice), an HloProto's
buffer assignment (hlo, heap_traces) and a file's first bytes (trace_head) are walked with these;
protobuf's parser reads the small messages inside (advisor/load/protos.py).
"""

from __future__ import annotations

from typing import Iterator

VARINT, I64, LEN, I32 = 0, 1, 2, 5      # wire types; 3 and 4 (groups) are not written by any reader here


class WireError(ValueError):
    """Bytes that are not a field where one was expected: truncated, or not protobuf."""


def varint(buf, pos: int) -> tuple[int, int]:
    """(value, the position after it); IndexError where the bytes end inside it, WireError past 10 bytes."""
    result = shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise WireError("bad varint")


def skip(buf, pos: int, wire: int) -> int:
    """The position after a value of this wire type that starts at pos."""
    if wire == VARINT:
        return varint(buf, pos)[1]
    if wire == I64:
        return pos + 8
    if wire == LEN:
        length, pos = varint(buf, pos)
        return pos + length
    if wire == I32:
        return pos + 4
    raise WireError(f"unsupported wire type {wire}")


def fields(buf, pos: int, end: int) -> Iterator[tuple[int, int, int, int, int]]:
    """(number, wire type, field start, value start, field end) of each field in buf[pos:end]; a
    field that is cut short or numbered 0 raises WireError."""
    while pos < end:
        start = pos
        try:
            key, pos = varint(buf, pos)
            number, wire = key >> 3, key & 7
            if wire == LEN:
                length, body = varint(buf, pos)
                pos = body + length
            else:
                body = pos
                pos = skip(buf, pos, wire)
        except (IndexError, WireError):
            raise WireError("truncated or malformed field") from None
        if pos > end or number == 0:        # cut short, or numbered 0 (protobuf never writes it)
            raise WireError("truncated or malformed field")
        yield number, wire, start, body, pos


def messages(buf, pos: int, end: int) -> Iterator[tuple[int, int, int]]:
    """(number, value start, value end) of each length-delimited field in buf[pos:end], the others
    passed over."""
    for number, wire, _, body, stop in fields(buf, pos, end):
        if wire == LEN:
            yield number, body, stop


def field_value(buf, pos: int, end: int, number: int):
    """(value start, value end) of the first length-delimited field `number` in buf[pos:end], or None."""
    for n, body, stop in messages(buf, pos, end):
        if n == number:
            return body, stop
    return None


def encode_varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def encode_field(number: int, value: bytes) -> bytes:
    """A length-delimited field."""
    return encode_varint(number << 3 | LEN) + encode_varint(len(value)) + value
