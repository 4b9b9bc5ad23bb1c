"""Keep the heap simulation of a program loaded from the compilation cache in its trace.

The profiler records each program's HLO with XLA's buffer assignment (`HloProto.buffer_assignment`);
xprof's memory viewer finds the peak and the buffers live there from its heap simulator traces. A
program JAX loads from its persistent cache carries the same buffer assignment but no heap
simulator traces, so the peak read from that trace would be wrong. After a workload's trace is
written, `restore` keeps the traces of each freshly compiled step program beside the cache, keyed by
the buffer assignment itself (logical buffers, aliases, allocations: equal for the compiled and the
loaded program), and writes them back into a trace whose program lacks them. Only our own run
folder's trace is rewritten, never a trace advisor reads.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Optional

from .load.wire import LEN, WireError, encode_field, varint
from .load.xplane import XSPACE_PLANES, XPlane, metadata_plane

_HLO_MODULE, _BUFFER_ASSIGNMENT = 1, 3     # HloProto
_HEAP_TRACES = 4                           # BufferAssignmentProto.heap_simulator_traces
MAX_BYTES = 256 * 1024 ** 2                # the kept traces beyond this are removed, oldest first


def folder_for(cache_dir: Path) -> Path:
    """Beside JAX's cache folder, so that JAX's eviction never counts them."""
    return cache_dir.parent / (cache_dir.name + "-heap-traces")


def restore(xplane: Path, cache_dir: Optional[Path], module_name: str) -> list[str]:
    """Keep or restore the heap traces of the programs named `module_name` in `xplane`; returns the
    program keys (`name(id)`) whose traces were written back."""
    if cache_dir is None:
        return []
    store = folder_for(cache_dir)
    data = xplane.read_bytes()
    span = metadata_plane(data)
    if span is None:
        return []
    start, body, end = span
    plane = XPlane()        # its lines, undeclared in the schema, are written back as they are
    plane.ParseFromString(data[body:end])
    hlo_stat = next((k for k, v in plane.stat_metadata.items() if v.name == "Hlo Proto"), None)
    restored = []
    for meta in plane.event_metadata.values():
        if meta.name.rsplit("(", 1)[0] != module_name:
            continue
        for stat in meta.stats:
            if stat.metadata_id != hlo_stat or not stat.bytes_value:
                continue
            try:
                fixed = _keep_or_restore(stat.bytes_value, store)
            except (ValueError, IndexError, OSError):     # not the HloProto we know, or no room: left as it is
                fixed = None
            if fixed is not None:
                stat.bytes_value = fixed
                restored.append(meta.name)
    if restored:
        new_plane = plane.SerializeToString()
        tmp = xplane.with_name(xplane.name + ".tmp")
        tmp.write_bytes(data[:start] + encode_field(XSPACE_PLANES, new_plane) + data[end:])
        tmp.replace(xplane)
    _prune(store)
    return restored


def _keep_or_restore(hlo_proto: bytes, store: Path) -> Optional[bytes]:
    """The HloProto with its heap traces written back (None: it had them, or none are kept)."""
    parts = _fields(hlo_proto)
    assignments = [v for f, v in parts if f == _BUFFER_ASSIGNMENT]
    if len(assignments) != 1:
        return None
    assignment = _fields(assignments[0])
    traces = b"".join(encode_field(f, v) for f, v in assignment if f == _HEAP_TRACES)
    digest = hashlib.sha256(b"".join(encode_field(f, v) for f, v in assignment if f != _HEAP_TRACES)).hexdigest()
    kept = store / f"{digest}.pb"
    if traces:
        if not kept.exists():
            store.mkdir(parents=True, exist_ok=True)
            tmp = kept.with_name(f"{kept.name}.{os.getpid()}.tmp")     # another process may write it too
            tmp.write_bytes(traces)
            tmp.replace(kept)
        return None
    if not kept.is_file():
        return None
    kept.touch()      # recently used: pruned last
    new_assignment = assignments[0] + kept.read_bytes()     # repeated fields may follow the others
    return b"".join(encode_field(f, new_assignment if f == _BUFFER_ASSIGNMENT else v) for f, v in parts)


def _fields(buf: bytes) -> list[tuple[int, bytes]]:
    """A message's length-delimited fields in order (the messages read here have no others)."""
    out, pos, end = [], 0, len(buf)
    while pos < end:
        key, pos = varint(buf, pos)
        if key & 7 != LEN:
            raise WireError("unexpected wire type")
        length, body = varint(buf, pos)
        out.append((key >> 3, buf[body:body + length]))
        pos = body + length
    return out


def _prune(store: Path) -> None:
    try:
        files = sorted(store.glob("*.pb"), key=lambda f: f.stat().st_mtime, reverse=True)
    except OSError:
        return
    total = 0
    for f in files:
        total += f.stat().st_size
        if total > MAX_BYTES:
            f.unlink(missing_ok=True)
