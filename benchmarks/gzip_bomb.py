"""A gzip bomb as `memory.prof`: peak memory of reading it, gzip.decompress against advisor's bounded read.

The bomb is zeros compressed (about 1 MB per GiB expanded). Each read runs in a child process of its
own and reports its peak RSS (ru_maxrss); the ratio is the unbounded peak over the bounded one.

    python benchmarks/gzip_bomb.py [--gib 1]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

_CHILD = """
import resource, sys, time
from pathlib import Path
path, how = Path(sys.argv[1]), sys.argv[2]
t0 = time.perf_counter()
if how == "gzip.decompress":
    import gzip
    out = f"{len(gzip.decompress(path.read_bytes())) >> 20} MiB decompressed"
else:
    from advisor.errors import AdvisorError
    from advisor.load.memprof import read_memory_profile
    try:
        read_memory_profile(path)
        out = "read"
    except AdvisorError as err:
        out = str(err).split(": ", 1)[1][:70]
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss >> 10, f"{time.perf_counter() - t0:.2f}", out)
"""


def bomb(path: Path, gib: int) -> None:
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = bytes(1 << 20)
    with open(path, "wb") as fh:
        for _ in range(gib << 10):
            fh.write(c.compress(block))
        fh.write(c.flush())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gib", type=int, default=1, help="GiB the bomb expands to")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "memory.prof"
        bomb(path, args.gib)
        print(f"bomb: {path.stat().st_size / 1e6:.2f} MB expanding to {args.gib} GiB")
        peaks = {}
        for how in ("gzip.decompress", "advisor (bounded)"):
            t0 = time.perf_counter()
            line = subprocess.run([sys.executable, "-c", _CHILD, str(path), how], capture_output=True, text=True,
                                  check=True).stdout.split(" ", 2)
            peaks[how] = int(line[0])
            print(f"{how:<18} peak RSS {int(line[0]):>6} MiB  {line[1]:>6} s  {line[2].strip()}"
                  f"  (wall {time.perf_counter() - t0:.1f} s)")
        print(f"peak RSS ratio, unbounded / bounded: {peaks['gzip.decompress'] / peaks['advisor (bounded)']:.1f}x")


if __name__ == "__main__":
    main()
