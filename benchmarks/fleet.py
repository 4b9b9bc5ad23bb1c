"""Throughput and memory of `advisor analyze` on a fleet: sequential, `--jobs N` and `--engine ray`.

Builds a logdir of --runs runs in a temporary folder (each run a folder of links to one of the
committed fixture runs `fixtures/transformer_*`, taken in turn), then analyzes it once per mode,
each in a fresh `python -m advisor.cli analyze LOGDIR --format jsonl` whose whole process tree
(worker processes, xprof's converter children, Ray's raylet and workers) is sampled for its
resident memory every --sample-s seconds. Prints, side by side, the wall time, runs/s, runs/s per
core used (1 for sequential, N otherwise) and the peak RSS of the tree, and checks that every mode
printed the same documents. The temporary folder is removed at the end.

`--engine ray` on a local machine runs the default engine where a local Ray would be slower (fewer
than 2 idle cores, one host file; it says so), so the mode `--ray-address local` (a local Ray
whatever the load) is shown beside it. `--busy N` keeps N cores busy (a spinning process each) for
the whole measurement, as a neighbour would; `--repeat R` runs the modes in turns R times and shows
the median wall time.

    nice -n 10 python benchmarks/fleet.py [--runs 200] [--jobs 2] [--no-ray] [--busy 1] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = sorted(p for p in (ROOT / "fixtures").glob("transformer_*") if p.is_dir())


def build(folder: Path, runs: int) -> None:
    for i in range(runs):
        source = FIXTURES[i % len(FIXTURES)]
        shutil.copytree(source, folder / f"run_{i:04d}_{source.name}", copy_function=os.symlink)


def tree_rss(proc: psutil.Process) -> int:
    total = 0
    for p in [proc, *proc.children(recursive=True)]:
        try:
            total += p.memory_info().rss
        except psutil.Error:
            pass
    return total


def measure(logdir: Path, extra: list[str], sample_s: float) -> dict:
    cmd = [sys.executable, "-m", "advisor.cli", "analyze", str(logdir), "--format", "jsonl", *extra]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
        watched, peak = psutil.Process(proc.pid), 0
        while proc.poll() is None:
            try:
                peak = max(peak, tree_rss(watched))
            except psutil.Error:
                pass
            time.sleep(sample_s)
        wall = time.perf_counter() - start
        out.seek(0)
        err.seek(0)
        lines = out.read().decode().splitlines()
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}: {err.read().decode()[-2000:]}")
    return {"wall_s": wall, "peak_rss": peak, "lines": lines}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--no-ray", action="store_true", help="Leave out --engine ray.")
    ap.add_argument("--sample-s", type=float, default=0.05)
    ap.add_argument("--busy", type=int, default=0, help="Cores kept busy by spinning processes meanwhile.")
    ap.add_argument("--repeat", type=int, default=1, help="Turns of every mode; the median wall time is shown.")
    args = ap.parse_args()

    modes = [("sequential", ["--jobs", "1"], 1),
             (f"--jobs {args.jobs}", ["--jobs", str(args.jobs)], args.jobs)]
    if not args.no_ray:
        try:
            import ray  # noqa: F401
            modes.append((f"--engine ray --jobs {args.jobs}", ["--engine", "ray", "--jobs", str(args.jobs)],
                          args.jobs))
            modes.append(("  --ray-address local", ["--engine", "ray", "--ray-address", "local",
                                                   "--jobs", str(args.jobs)], args.jobs))
        except ImportError:
            print("ray is not installed (pip install 'jax-advisor[ray]'): --engine ray left out")
    with tempfile.TemporaryDirectory(prefix="advisor-fleet-") as tmp:
        logdir = Path(tmp) / "logdir"
        build(logdir, args.runs)
        print(f"{args.runs} runs (links to {len(FIXTURES)} fixture runs, "
              f"{sum(f.stat().st_size for f in logdir.rglob('*.xplane.pb')) / 2**20:.0f} MiB of traces); "
              f"{os.cpu_count()} cores, {args.busy} kept busy, load average {os.getloadavg()[0]:.2f} at the start")
        spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.busy)]
        try:
            turns: dict[str, list[dict]] = {name: [] for name, _, _ in modes}
            for _ in range(args.repeat):
                for name, extra, cores in modes:
                    turns[name].append(measure(logdir, extra, args.sample_s))
        finally:
            for spinner in spinners:
                spinner.kill()
                spinner.wait()
        results = {}
        for name, _, cores in modes:
            runs = turns[name]
            results[name] = {"wall_s": statistics.median(r["wall_s"] for r in runs),
                             "peak_rss": max(r["peak_rss"] for r in runs), "lines": runs[0]["lines"],
                             "cores": cores, "all_same": all(r["lines"] == runs[0]["lines"] for r in runs)}
    first = next(iter(results.values()))["lines"]
    same = all(r["lines"] == first and r["all_same"] for r in results.values())
    base = results["sequential"]["wall_s"]
    print(f"{'mode':<26}{'wall s':>9}{'/ seq':>7}{'runs/s':>9}{'cores':>7}{'runs/s/core':>13}{'peak RSS MiB':>14}")
    for name, r in results.items():
        rate = args.runs / r["wall_s"]
        print(f"{name:<26}{r['wall_s']:>9.1f}{r['wall_s'] / base:>7.2f}{rate:>9.2f}{r['cores']:>7}{rate / r['cores']:>13.2f}"
              f"{r['peak_rss'] / 2**20:>14.0f}")
    print(f"every mode printed the same {len(first)} documents: {'yes' if same else 'NO'}; "
          f"load average {os.getloadavg()[0]:.2f} at the end")
    if not same:
        sys.exit(1)


if __name__ == "__main__":
    main()
