"""`advisor analyze` of the traces people look at most (a few MB, a few steps) against the floor.

Both sides are whole fresh processes, timed from start to exit, since on a small trace the start
is most of the cost:

- floor: `python -c` that imports `jax.profiler`, parses the file with `ProfileData.from_file`
  and reads every event's name and duration once (what any reader of the trace with jax's own
  parser pays, jax's import included);
- advisor: `python -m advisor analyze FILE --format json` (the whole analysis: timeline, HLO and
  memory viewer through xprof's converters in their child process, rules, rendering).

The two run in turns, --repeat times per file, so a neighbour's load falls on both; prints the
medians of the wall time and of the CPU time of each process tree (the steadier figure on a
shared machine), and advisor / floor for both.

Both run from compiled bytecode, as installed packages do (pip compiles them): jax's modules
come with theirs, and an untimed first run of each side compiles advisor's. Where
PYTHONDONTWRITEBYTECODE is set (this project's development machines set it), it is left out of
the children's environment: else advisor's hundred modules are compiled from source on every
run (0.1 s on the notebook trace) while jax's are not.

With --baseline-python PYTHON (another checkout's interpreter, e.g. main's `.venv/bin/python`), a
third side runs `PYTHON -m advisor analyze` in the same turns, and this tree / baseline is printed
beside: a change's cost measured side by side. Every side runs from a neutral folder, so neither
imports the clone it was started in.

    nice -n 5 python benchmarks/small_trace.py [--repeat 7] [--baseline-python PY] [FILE_OR_RUN ...]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT = [ROOT / "fixtures" / "transformer_scan", ROOT / "fixtures" / "parallel" / "pmap_data_parallel",
           ROOT / "fixtures" / "gpu-traces" / "tf_bert_v100_multiworker"]

FLOOR = r"""
import sys
from jax.profiler import ProfileData
pd = ProfileData.from_file(sys.argv[1])
n, total = 0, 0.0
for plane in pd.planes:
    for line in plane.lines:
        for ev in line.events:
            name = ev.name
            total += ev.duration_ns
            n += 1
"""


ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"} | {"TF_CPP_MIN_LOG_LEVEL": "2"}


def xplane_of(path: Path) -> Path:
    return path if path.is_file() else sorted(path.rglob("*.xplane.pb"))[0]


NEUTRAL = tempfile.mkdtemp(prefix="small-trace-")     # the children's working folder: no clone on their path


def timed(cmd: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the process and its children): on a shared machine the CPU
    time is the steadier figure, the wall time what a user waits."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV, cwd=NEUTRAL)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="*", type=Path, default=DEFAULT)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--baseline-python", metavar="PY", help="another checkout's Python: its advisor timed beside")
    args = ap.parse_args()
    print(f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at the start; medians of {args.repeat}")
    base_head = f"{'base s':>8}{'this/base':>10}{'base CPU s':>12}{'this/base':>10}" if args.baseline_python else ""
    print(f"{'trace':<46}{'MB':>5}{'floor s':>9}{'advisor s':>11}{'ratio':>7}{'floor CPU s':>13}"
          f"{'advisor CPU s':>15}{'ratio':>7}{base_head}")
    for path in args.paths:
        xplane = xplane_of(path.resolve())
        sides = {"floor": [sys.executable, "-c", FLOOR, str(xplane)],
                 "advisor": [sys.executable, "-m", "advisor", "analyze", str(xplane), "--format", "json"]}
        if args.baseline_python:
            sides["base"] = [args.baseline_python, "-m", "advisor", "analyze", str(xplane), "--format", "json"]
        runs: dict[str, list] = {side: [] for side in sides}
        for cmd in sides.values():
            timed(cmd)         # untimed: compiles, and reads the file into the cache
        for _ in range(args.repeat):
            for side, cmd in sides.items():
                runs[side].append(timed(cmd))
        wall = {side: statistics.median(w for w, _ in r) for side, r in runs.items()}
        cpu = {side: statistics.median(c for _, c in r) for side, r in runs.items()}
        f, a, fc, ac = wall["floor"], wall["advisor"], cpu["floor"], cpu["advisor"]
        name = str(path.resolve().relative_to(ROOT)) if path.resolve().is_relative_to(ROOT) else str(path)
        base = (f"{wall['base']:>8.2f}{a / wall['base']:>9.2f}x{cpu['base']:>12.2f}{ac / cpu['base']:>9.2f}x"
                if "base" in sides else "")
        print(f"{name[-46:]:<46}{xplane.stat().st_size / 1e6:>5.1f}{f:>9.2f}{a:>11.2f}{a / f:>6.2f}x"
              f"{fc:>13.2f}{ac:>15.2f}{ac / fc:>6.2f}x{base}", flush=True)
    print(f"load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
