"""How fast `advisor analyze` reads a large trace, against the floor of just reading it.

Records a large CPU trace (the tiny Transformer for many steps: 100 MB of .xplane.pb or
more; written under benchmarks/out/, not committed), then measures, each in a fresh process:

- floor: `jax.profiler.ProfileData.from_file` plus reading every event's name and duration once;
- analyze: advisor's whole analysis of that file (load, HLO, memory viewer, rules), in process;
- cli: the `advisor analyze --format json` command, interpreter start and imports included;

and prints analyze / floor and analyze's peak RSS / file size.

    python benchmarks/analyze_speed.py [--steps N] [--min-mb 100] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

OUT = Path(__file__).resolve().parent / "out" / "large_trace"

FLOOR = r"""
import json, resource, sys, time
from jax.profiler import ProfileData
t0 = time.perf_counter()
pd = ProfileData.from_file(sys.argv[1])
parsed = time.perf_counter()
n = 0
total = 0.0
for plane in pd.planes:
    for line in plane.lines:
        for ev in line.events:
            name = ev.name
            total += ev.duration_ns
            n += 1
done = time.perf_counter()
print(json.dumps({"parse_s": parsed - t0, "read_s": done - parsed, "events": n,
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""

ANALYZE = r"""
import json, resource, sys, time
import jax.profiler  # imports are not part of the measured analysis
from advisor.engine import analyze_path
t0 = time.perf_counter()
analyses = analyze_path(sys.argv[1])
done = time.perf_counter()
print(json.dumps({"analyze_s": done - t0, "findings": [f.rule for f in analyses[0].findings],
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def record(steps: int) -> Path:
    from advisor import runner, workloads

    import shutil
    shutil.rmtree(OUT, ignore_errors=True)
    config = workloads.resolve("transformer", "tiny", [f"train.steps={steps}"])
    run_dir = runner.profile_workload("transformer", "tiny", config, OUT, lambda m: print("  " + m, flush=True))
    return next(run_dir.glob("*.xplane.pb"))


def child(code: str, path: Path) -> dict:
    proc = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=110, help="profiled steps of the tiny Transformer")
    ap.add_argument("--min-mb", type=float, default=100.0, help="record again with more steps until this big")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--reuse", action="store_true", help="reuse the trace under benchmarks/out/ if present")
    args = ap.parse_args()

    existing = sorted(OUT.rglob("*.xplane.pb"))
    if args.reuse and existing:
        xplane = existing[-1]
    else:
        steps = args.steps
        while True:
            print(f"recording the tiny Transformer for {steps} steps ...", flush=True)
            xplane = record(steps)
            size_mb = xplane.stat().st_size / 1e6
            if size_mb >= args.min_mb:
                break
            steps = int(steps * args.min_mb / size_mb * 1.1) + 1
    size = xplane.stat().st_size
    print(f"trace: {xplane} ({size / 1e6:.1f} MB)")

    floors, analyses, clis = [], [], []
    for _ in range(args.repeat):
        floors.append(child(FLOOR, xplane))
        analyses.append(child(ANALYZE, xplane))
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "advisor.cli", "analyze", str(xplane), "--format", "json"],
                       capture_output=True, check=True)
        clis.append(time.perf_counter() - t0)

    floor_s = statistics.median(f["parse_s"] + f["read_s"] for f in floors)
    analyze_s = statistics.median(a["analyze_s"] for a in analyses)
    cli_s = statistics.median(clis)
    rss_mb = max(a["rss_mb"] for a in analyses)
    print(f"events: {floors[0]['events']:,}")
    print(f"floor (parse {statistics.median(f['parse_s'] for f in floors):.2f} s + read names and durations "
          f"{statistics.median(f['read_s'] for f in floors):.2f} s): {floor_s:.2f} s")
    print(f"advisor analysis (in process, imports excluded): {analyze_s:.2f} s")
    print(f"`advisor analyze` command (interpreter start and imports included): {cli_s:.2f} s")
    print(f"findings: {', '.join(analyses[0]['findings']) or 'none'}")
    print(f"ratio analysis / floor: {analyze_s / floor_s:.2f}x   (target <= 3x)")
    print(f"ratio command / floor: {cli_s / floor_s:.2f}x")
    floor_rss = max(f["rss_mb"] for f in floors)
    print(f"peak RSS of the analysis: {rss_mb:.0f} MiB = {rss_mb * 2**20 / size:.1f}x the file size "
          f"(the floor's process alone: {floor_rss:.0f} MiB = {floor_rss * 2**20 / size:.1f}x)")


if __name__ == "__main__":
    main()
