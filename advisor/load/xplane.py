"""The XPlane schema: the messages of tsl/profiler/protobuf/xplane.proto that advisor reads, with
their upstream field numbers (../shared/GPU_XPLANE_SCHEMA.md), and the walk to a plane, declared
once for every reader of an XSpace: the streaming reader (xplane_stream, event_decoder), the
metadata plane's slicer (xspace_slice) and the heap traces' rewriter (heap_traces). Fields not
declared here (a line's id and display name, a plane's lines) are skipped by protobuf's parser,
and kept by it when a message is written back.
"""

from __future__ import annotations

from typing import Iterator, Optional

from google.protobuf.message import DecodeError

from .protos import message_class
from .wire import LEN, WireError, field_value, fields

# field numbers, for the readers that walk the bytes (advisor/load/wire.py)
XSPACE_PLANES, XSPACE_HOSTNAMES = 1, 4
PLANE_ID, PLANE_NAME, PLANE_LINES, PLANE_EVENT_METADATA, PLANE_STAT_METADATA, PLANE_STATS = 1, 2, 3, 4, 5, 6
LINE_EVENTS = 4
EVENT_METADATA_NAME, EVENT_METADATA_STATS = 2, 5
MAP_VALUE = 2           # a map entry's value (XPlane.event_metadata is a map<int64, XEventMetadata>)
STAT_BYTES_VALUE = 6
EVENT_TAG = LINE_EVENTS << 3 | LEN      # the key byte of each event in a line
METADATA_PLANE = b"/host:metadata"      # the plane whose event metadata hold each program's HLO

_SCHEMA = """
name: "advisor_xplane.proto"
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
  field { name: "stats" number: 5 label: LABEL_REPEATED type: TYPE_MESSAGE type_name: ".advisor_xplane.XStat" }
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
"""  # noqa: E501 - a table, one field a line, read against xplane.proto

XEvent = message_class(_SCHEMA, "advisor_xplane.XEvent")
XLine = message_class(_SCHEMA, "advisor_xplane.XLine")
XPlane = message_class(_SCHEMA, "advisor_xplane.XPlane")    # a plane without its lines (read line by line)


def parse(cls, data):
    """A message of one of these classes from its bytes; damage is one WireError."""
    msg = cls()
    try:
        msg.ParseFromString(data)
    except DecodeError as err:
        raise WireError(f"bad message: {err}") from None
    return msg


def planes(xspace) -> Iterator[tuple[int, int, int]]:
    """(field start, value start, end) of each plane of a serialized XSpace."""
    for number, wire, start, body, end in fields(xspace, 0, len(xspace)):
        if number == XSPACE_PLANES and wire == LEN:
            yield start, body, end


def plane_name(buf, start: int, end: int) -> bytes:
    """A plane's `name`: writers put it right after its `id`, so the plane's other fields (its lines
    and metadata, most of its bytes) are not walked."""
    found = field_value(buf, start, end, PLANE_NAME)
    return bytes(buf[found[0]:found[1]]) if found else b""


def metadata_plane(xspace) -> Optional[tuple[int, int, int]]:
    """(field start, value start, end) of the `/host:metadata` plane of a serialized XSpace, or None."""
    return next((p for p in planes(xspace) if plane_name(xspace, p[1], p[2]) == METADATA_PLANE), None)
