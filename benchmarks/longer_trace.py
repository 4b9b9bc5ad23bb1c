"""Make a trace of a longer run from a recording: its host plane's lines repeated in time.

A real 1 GB CPU trace cannot be recorded on a 24 GB machine (jax.profiler's process passed
21 GB recording one), and concatenating a file's bytes gives planes that repeat rather than a
longer run. This writes copy k of every line of the `/host:CPU` plane with its timestamp moved
k times the trace's span later, its program executions given new run ids (`run_id` + k * 2**32)
and its steps new numbers (`step_num` + k * steps), so the copies read as later steps of the
same program: k times the ops, steps and executions, each analyzed. The other planes (the
metadata plane with the HLO) are written once. Events are copied as bytes, except those of
lines that carry run ids or step numbers, which are parsed and written again 2 MB at a time.

    python benchmarks/longer_trace.py SRC.xplane.pb DST.xplane.pb COPIES
"""

from __future__ import annotations

import mmap
import os
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from advisor.load.wire import LEN as _LEN  # noqa: E402
from advisor.load.wire import encode_varint as _varint  # noqa: E402
from advisor.load.wire import fields as _fields  # noqa: E402
from advisor.load.xplane import EVENT_TAG as _EVENT_TAG  # noqa: E402
from advisor.load.xplane import PLANE_LINES as _LINES  # noqa: E402
from advisor.load.xplane import XSPACE_PLANES as _PLANES  # noqa: E402
from advisor.load.xplane import XLine  # noqa: E402
from advisor.load.xplane_stream import StreamSpace, _event_run  # noqa: E402

HOST = "/host:CPU"
_RUN_SHIFT = 1 << 32


def _span_and_steps(path: Path) -> tuple[int, int, dict[str, int]]:
    """The host plane's span in ns, its step count (highest step number + 1) and the ids of the
    stats the copies renumber."""
    plane = StreamSpace(path).find_plane_with_name(HOST)
    ids = {name: i for i, name in plane._stat_names.items() if name in ("run_id", "step_num")}
    first, last, steps = None, None, 0
    for line in plane.lines:
        for chunk in line.chunks():
            if len(chunk):
                lo, hi = float(chunk.start_ns.min()), float((chunk.start_ns + chunk.dur_ns).max())
                first = lo if first is None else min(first, lo)
                last = hi if last is None else max(last, hi)
            if not line.name.startswith("tf_"):
                for i in range(len(chunk)):
                    value = chunk.stats(i, frozenset({"step_num"})).get("step_num")
                    if value is not None:
                        steps = max(steps, int(value) + 1)
    return int(last - first) + 1000, steps, ids


def _line_copy(buf, start: int, end: int, k: int, span_ns: int, steps: int, ids: dict[str, int]) -> bytes:
    """Line buf[start:end] moved k spans later: its head parsed and written again, its events
    as bytes, or renumbered where they carry run ids or step numbers."""
    head, runs, pos = bytearray(), [], start
    while pos < end:
        if buf[pos] == _EVENT_TAG:
            run_end = _event_run(buf, pos, end)
            runs.append((pos, run_end))
            pos = run_end
            continue
        field_end = next(_fields(buf, pos, end))[4]
        head += buf[pos:field_end]
        pos = field_end
    line = XLine()
    line.ParseFromString(bytes(head))
    renumber = k and (line.name.startswith("tf_XLA") or not line.name.startswith("tf_"))
    line.timestamp_ns += k * span_ns
    out = [line.SerializeToString()]
    for run_start, run_end in runs:
        data = buf[run_start:run_end]
        if renumber:
            chunk = XLine()
            chunk.ParseFromString(data)
            touched = False
            for event in chunk.events:
                for stat in event.stats:
                    if stat.metadata_id == ids.get("run_id"):
                        kind = stat.WhichOneof("value")
                        setattr(stat, kind, getattr(stat, kind) + k * _RUN_SHIFT)
                        touched = True
                    elif stat.metadata_id == ids.get("step_num"):
                        kind = stat.WhichOneof("value")
                        setattr(stat, kind, getattr(stat, kind) + k * steps)
                        touched = True
            if touched:
                data = chunk.SerializeToString()
        out.append(bytes(data))
    return b"".join(out)


def make_longer(src: Path, dst: Path, copies: int) -> None:
    span_ns, steps, ids = _span_and_steps(src)
    with open(src, "rb") as f, open(dst, "wb") as out:
        buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        for field, wire, fstart, body, fend in _fields(buf, 0, len(buf)):
            if not (field == _PLANES and wire == _LEN and _is_host(buf, body, fend)):
                out.write(buf[fstart:fend])
                continue
            with tempfile.TemporaryFile(dir=dst.parent) as plane:
                lines = []
                for pf, pw, pstart, pbody, pend in _fields(buf, body, fend):
                    if pf == _LINES and pw == _LEN:
                        lines.append((pbody, pend))
                    else:
                        plane.write(buf[pstart:pend])
                tag = _varint(_LINES << 3 | _LEN)
                for k in range(copies):
                    for lstart, lend in lines:
                        data = _line_copy(buf, lstart, lend, k, span_ns, steps, ids)
                        plane.write(tag + _varint(len(data)) + data)
                size = plane.tell()
                plane.seek(0)
                out.write(_varint(_PLANES << 3 | _LEN) + _varint(size))
                shutil.copyfileobj(plane, out, 16 << 20)


def _is_host(buf, body: int, fend: int) -> bool:
    for field, wire, _, fbody, ffend in _fields(buf, body, fend):
        if field == 2 and wire == _LEN:
            return bytes(buf[fbody:ffend]) == HOST.encode()
    return False


if __name__ == "__main__":
    source, target, n = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
    make_longer(source, target, n)
    print(f"{target}: {os.path.getsize(target) / 1e6:.1f} MB, {n} copies of {source} in time")
