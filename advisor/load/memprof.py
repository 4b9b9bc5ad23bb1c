"""Read the device memory profile `jax.profiler.save_device_memory_profile` writes.

The file is a gzipped pprof `perftools.profiles.Profile` (google/pprof proto/profile.proto).
We declare the messages we read with pprof's field numbers; values are
[allocations count, space bytes] and labels carry `kind` and `device`.
"""

from __future__ import annotations

import zlib
from pathlib import Path

from google.protobuf.message import DecodeError

from ..errors import AdvisorError
from ..model import MemoryProfileEntry
from .protos import message_class

_SCHEMA = """
name: "advisor_pprof_subset.proto"
package: "advisor_pprof"
syntax: "proto3"
message_type {
  name: "ValueType"
  field { name: "type" number: 1 label: LABEL_OPTIONAL type: TYPE_INT64 }
  field { name: "unit" number: 2 label: LABEL_OPTIONAL type: TYPE_INT64 }
}
message_type {
  name: "Label"
  field { name: "key" number: 1 label: LABEL_OPTIONAL type: TYPE_INT64 }
  field { name: "str" number: 2 label: LABEL_OPTIONAL type: TYPE_INT64 }
  field { name: "num" number: 3 label: LABEL_OPTIONAL type: TYPE_INT64 }
}
message_type {
  name: "Sample"
  field { name: "location_id" number: 1 label: LABEL_REPEATED type: TYPE_UINT64 }
  field { name: "value" number: 2 label: LABEL_REPEATED type: TYPE_INT64 }
  field { name: "label" number: 3 label: LABEL_REPEATED type: TYPE_MESSAGE type_name: ".advisor_pprof.Label" }
}
message_type {
  name: "Line"
  field { name: "function_id" number: 1 label: LABEL_OPTIONAL type: TYPE_UINT64 }
  field { name: "line" number: 2 label: LABEL_OPTIONAL type: TYPE_INT64 }
}
message_type {
  name: "Location"
  field { name: "id" number: 1 label: LABEL_OPTIONAL type: TYPE_UINT64 }
  field { name: "line" number: 4 label: LABEL_REPEATED type: TYPE_MESSAGE type_name: ".advisor_pprof.Line" }
}
message_type {
  name: "Function"
  field { name: "id" number: 1 label: LABEL_OPTIONAL type: TYPE_UINT64 }
  field { name: "name" number: 2 label: LABEL_OPTIONAL type: TYPE_INT64 }
  field { name: "filename" number: 4 label: LABEL_OPTIONAL type: TYPE_INT64 }
}
message_type {
  name: "Profile"
  field { name: "sample_type" number: 1 label: LABEL_REPEATED type: TYPE_MESSAGE type_name: ".advisor_pprof.ValueType" }
  field { name: "sample" number: 2 label: LABEL_REPEATED type: TYPE_MESSAGE type_name: ".advisor_pprof.Sample" }
  field { name: "location" number: 4 label: LABEL_REPEATED type: TYPE_MESSAGE type_name: ".advisor_pprof.Location" }
  field { name: "function" number: 5 label: LABEL_REPEATED type: TYPE_MESSAGE type_name: ".advisor_pprof.Function" }
  field { name: "string_table" number: 6 label: LABEL_REPEATED type: TYPE_STRING }
}
"""


PprofProfile = message_class(_SCHEMA, "advisor_pprof.Profile")

# A memory profile expands about 3-10 times; a gzip bomb (a few MB that expand to GBs) is stopped at
# MAX_RATIO times the file's size, at least FLOOR_BYTES, at most MAX_BYTES.
MAX_RATIO = 100
FLOOR_BYTES = 16 << 20
MAX_BYTES = 256 << 20
_STEP = 1 << 20


def gunzip_bounded(data: bytes, limit: int) -> bytes:
    """gzip.decompress (every member), raising ValueError past `limit` bytes out, without ever holding
    more than that: the output is produced a step at a time."""
    out = bytearray()
    too_big = f"expands to more than {limit >> 20} MiB (a gzip bomb?); not read"
    while data:
        d = zlib.decompressobj(wbits=31)
        pending = data
        while pending and not d.eof:
            chunk = d.decompress(pending, _STEP)
            out += chunk
            if len(out) > limit:
                raise ValueError(too_big)
            if not chunk and d.unconsumed_tail == pending:
                break     # no progress: let flush and the eof test below say what is wrong
            pending = d.unconsumed_tail
        if not d.eof:
            out += d.flush()     # the input is consumed: what is left is at most zlib's window
            if len(out) > limit:
                raise ValueError(too_big)
        if not d.eof:
            raise EOFError("compressed file ended before the end-of-stream marker was reached")
        data = d.unused_data.lstrip(b"\x00")   # gzip pads members with zeros at times
    return bytes(out)


def _limit(compressed: int) -> int:
    return min(MAX_BYTES, max(FLOOR_BYTES, MAX_RATIO * compressed))


def read_memory_profile(path: Path) -> list[MemoryProfileEntry]:
    """Bytes and allocation counts by (kind, device), each with its largest allocation sites."""
    try:
        data = path.read_bytes()
        raw = gunzip_bounded(data, _limit(len(data)))
        prof = PprofProfile()
        prof.ParseFromString(raw)
    except (OSError, EOFError, zlib.error, ValueError, DecodeError) as err:
        raise AdvisorError(f"{path}: not a readable device memory profile ({err}); "
                           "re-save it with jax.profiler.save_device_memory_profile or remove it") from None
    strings = list(prof.string_table)
    types = [strings[v.type] if v.type < len(strings) else "" for v in prof.sample_type]
    count_idx = types.index("allocations") if "allocations" in types else 0
    bytes_idx = types.index("space") if "space" in types else len(types) - 1
    text = lambda i: strings[i] if 0 <= i < len(strings) else ""  # noqa: E731
    functions = {f.id: (text(f.name), text(f.filename)) for f in prof.function}
    locations = {loc.id: [functions.get(ln.function_id, ("", "")) + (ln.line,) for ln in loc.line]
                 for loc in prof.location}
    totals: dict[tuple[str, str], list] = {}
    for sample in prof.sample:
        labels = {text(label.key): text(label.str) for label in sample.label}
        key = (labels.get("kind", "?"), labels.get("device", ""))
        entry = totals.setdefault(key, [0, 0, {}])
        values = list(sample.value)
        nbytes = values[bytes_idx] if bytes_idx < len(values) else 0
        entry[0] += nbytes
        entry[1] += values[count_idx] if count_idx < len(values) else 0
        site = _user_site(sample.location_id, locations)
        entry[2][site] = entry[2].get(site, 0) + nbytes
    return [MemoryProfileEntry(kind=k, device=d, bytes=b, count=c,
                               sites=sorted(sites.items(), key=lambda kv: -kv[1])[:5])
            for (k, d), (b, c, sites) in sorted(totals.items())]


def _user_site(location_ids, locations) -> str:
    """The innermost frame of the allocation's Python stack (leaf first) that is in user code."""
    from .hlo import is_library_frame

    for loc_id in location_ids:
        for func, filename, line in locations.get(loc_id, []):
            if filename and not is_library_frame(filename):
                return f"{filename}:{line} {func}"
    return "(library code)"
