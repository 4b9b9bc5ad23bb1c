"""Memory of reading a metadata-heavy trace: peak RSS over file size, against an ordinary trace.

A committed recording's `/host:CPU` plane gets a large table of event and stat metadata that no event
uses (what a hostile or unusual writer may produce): N entries with short names and, with --blob, a
payload of that many bytes in each (XEventMetadata.metadata). Each file is read in a child process by
the loader's timeline reader (what `advisor analyze` does before the rules) and its peak RSS
(ru_maxrss) reported; the ratio is (peak RSS - the interpreter's RSS before reading) / file size.

    python benchmarks/metadata_heavy.py [--entries 2000000] [--blob 0]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = next((ROOT / "fixtures" / "transformer_scan").rglob("*.xplane.pb"))

_CHILD = """
import resource, sys
from advisor.load import loader
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
loader.load_timeline(sys.argv[1])
print(base >> 10, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss >> 10)
"""


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(number: int, body: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(body)) + body


def _int(number: int, value: int) -> bytes:
    return _varint(number << 3) + _varint(value)


def heavy(src: Path, dst: Path, entries: int, blob: int) -> None:
    """src with `entries` event metadata and as many stat metadata appended to its /host:CPU plane."""
    from advisor.load.wire import fields as _fields

    data = src.read_bytes()
    extra = bytearray()
    payload = b"\x07" * blob
    for i in range(entries):
        key = 1_000_000_000 + i
        meta = _int(1, key) + _field(2, f"op.{i}".encode()) + (_field(3, payload) if blob else b"")
        extra += _field(4, _int(1, key) + _field(2, meta))
        stat = _int(1, key) + _field(2, f"s{i}".encode())
        extra += _field(5, _int(1, key) + _field(2, stat))
    out = bytearray()
    for field, _, start, body, end in _fields(data, 0, len(data)):
        if field == 1 and b"/host:CPU" in data[body:body + 64]:
            out += _field(1, data[body:end] + bytes(extra))
        else:
            out += data[start:end]
    dst.write_bytes(bytes(out))


def measure(path: Path) -> tuple[int, float]:
    base, peak = map(int, subprocess.run([sys.executable, "-c", _CHILD, str(path)], capture_output=True, text=True,
                                         check=True).stdout.split())
    size = path.stat().st_size
    return size, (peak - base) * 2**20 / size


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--entries", type=int, default=2_000_000)
    ap.add_argument("--blob", type=int, default=0, help="bytes of payload in each event metadata")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "heavy.xplane.pb"
        heavy(FIXTURE, path, args.entries, args.blob)
        for name, p in (("ordinary (fixture)", FIXTURE), (f"{args.entries:,} metadata entries", path)):
            size, ratio = measure(p)
            print(f"{name:<28} {size / 2**20:8.1f} MiB file   peak RSS growth {ratio:5.2f}x the file size")


if __name__ == "__main__":
    main()
