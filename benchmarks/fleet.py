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

`--cluster-cpus 1,2,...` measures instead a Ray cluster started beside the benchmark (`ray start
--head --num-cpus N`, one per count, stopped after it) joined by `--engine ray --ray-address`: the
throughput as the cluster's workers grow. The cluster's own processes are not children of the
analysis, so the peak RSS shown is the driver's alone there.

    nice -n 10 python benchmarks/fleet.py [--runs 200] [--jobs 2] [--no-ray] [--no-forced-local] [--busy 1] [--repeat 3]
    nice -n 10 python benchmarks/fleet.py --runs 40 --cluster-cpus 1,2 [--repeat 3]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
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
        lines, errors = out.read().decode().splitlines(), err.read().decode()
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}: {errors[-2000:]}")
    notes = [line for line in errors.splitlines() if line.startswith("advisor: note:")]
    return {"wall_s": wall, "peak_rss": peak, "lines": lines, "notes": notes}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--no-ray", action="store_true", help="Leave out --engine ray.")
    ap.add_argument("--no-forced-local", action="store_true",
                    help="Leave out --ray-address local (a local Ray whatever the load: the slowest mode).")
    ap.add_argument("--sample-s", type=float, default=0.05)
    ap.add_argument("--busy", type=int, default=0, help="Cores kept busy by spinning processes meanwhile.")
    ap.add_argument("--repeat", type=int, default=1, help="Turns of every mode; the median wall time is shown.")
    ap.add_argument("--cluster-cpus", help="Worker counts of a Ray cluster to measure, e.g. 1,2,4.")
    args = ap.parse_args()
    if args.cluster_cpus:
        cluster(args)
        return

    modes = [("sequential", ["--jobs", "1"], 1),
             (f"--jobs {args.jobs}", ["--jobs", str(args.jobs)], args.jobs)]
    if not args.no_ray:
        try:
            import ray  # noqa: F401
            modes.append((f"--engine ray --jobs {args.jobs}", ["--engine", "ray", "--jobs", str(args.jobs)],
                          args.jobs))
            if not args.no_forced_local:
                modes.append(("  --ray-address local", ["--engine", "ray", "--ray-address", "local",
                                                       "--jobs", str(args.jobs)], args.jobs))
        except ImportError:
            print("ray is not installed (pip install -e '.[ray]'): --engine ray left out")
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
                for name, extra, _ in modes:
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
                             "cores": cores, "all_same": all(r["lines"] == runs[0]["lines"] for r in runs),
                             "walls": [r["wall_s"] for r in runs]}
    first = next(iter(results.values()))["lines"]
    same = all(r["lines"] == first and r["all_same"] for r in results.values())
    base = results["sequential"]["wall_s"]
    print(f"{'mode':<26}{'wall s':>9}{'/ seq':>7}{'runs/s':>9}{'cores':>7}{'runs/s/core':>13}{'peak RSS MiB':>14}")
    for name, r in results.items():
        rate = args.runs / r["wall_s"]
        print(f"{name:<26}{r['wall_s']:>9.1f}{r['wall_s'] / base:>7.2f}{rate:>9.2f}{r['cores']:>7}"
              f"{rate / r['cores']:>13.2f}{r['peak_rss'] / 2**20:>14.0f}")
    if args.repeat > 1:
        for name, r in results.items():
            print(f"  {name.strip()}: every turn " + ", ".join(f"{w:.1f}" for w in r["walls"]) + " s")
    for name in results:      # what --engine ray chose (the default engine, and with how many jobs)
        for note in sorted({n for r in turns[name] for n in r["notes"]}):
            print(f"  {name.strip()}: {note}")
    ray_name, default_name = f"--engine ray --jobs {args.jobs}", f"--jobs {args.jobs}"
    if ray_name in results:     # the figure: --engine ray against the default engine beside it
        print(f"--engine ray / the default engine (--jobs {args.jobs}): "
              f"{results[ray_name]['wall_s'] / results[default_name]['wall_s']:.2f}; / sequential: "
              f"{results[ray_name]['wall_s'] / base:.2f}")
    print(f"every mode printed the same {len(first)} documents: {'yes' if same else 'NO'}; "
          f"load average {os.getloadavg()[0]:.2f} at the end")
    if not same:
        sys.exit(1)


def _free_port() -> int:
    import socket
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_for_port(port: int, head: subprocess.Popen, timeout_s: float = 60) -> None:
    import socket
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if head.poll() is not None:
            raise SystemExit(f"ray start exited {head.returncode}")
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.5)
    raise SystemExit(f"the Ray head did not listen on port {port} within {timeout_s:g} s")


def cluster(args) -> None:
    """Throughput of `--engine ray` on a Ray cluster of 1, 2, ... worker CPUs, sequential beside it."""
    counts = [int(c) for c in args.cluster_cpus.split(",")]
    ray_cli = str(Path(sys.executable).with_name("ray"))
    with tempfile.TemporaryDirectory(prefix="advisor-fleet-") as tmp:
        logdir = Path(tmp) / "logdir"
        build(logdir, args.runs)
        print(f"{args.runs} runs, {sum(f.stat().st_size for f in logdir.rglob('*.xplane.pb')) / 2**20:.0f} MiB of "
              f"traces; {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at the start")
        walls: dict[str, list[float]] = {"sequential": []}
        lines = {}
        for _ in range(args.repeat):
            r = measure(logdir, ["--jobs", "1"], args.sample_s)
            walls["sequential"].append(r["wall_s"])
            lines["sequential"] = r["lines"]
            for n in counts:
                port, name = _free_port(), f"cluster of {n} CPU{'s' if n > 1 else ''}"
                env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0")
                # --block: the head stays this process's child, and ending it ends its node (never
                # `ray stop`, which would stop every Ray of this user on the machine)
                head = subprocess.Popen([ray_cli, "start", "--head", "--block", f"--num-cpus={n}", f"--port={port}",
                                         "--include-dashboard=false", f"--temp-dir={tmp}/ray"],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
                                        start_new_session=True)
                try:
                    _wait_for_port(port, head)
                    time.sleep(3)      # the node's raylet and first workers up before the clock starts
                    r = measure(logdir, ["--engine", "ray", "--ray-address", f"127.0.0.1:{port}", "--jobs", str(n)],
                                args.sample_s)
                finally:       # the head and every process of its node (its session); SIGTERM takes Ray ~30 s
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(head.pid, signal.SIGKILL)
                    head.wait(timeout=60)
                walls.setdefault(name, []).append(r["wall_s"])
                lines[name] = r["lines"]
    base = statistics.median(walls["sequential"])
    print(f"{'mode':<24}{'wall s':>9}{'runs/s':>9}{'x sequential':>14}")
    for name, w in walls.items():
        wall = statistics.median(w)
        print(f"{name:<24}{wall:>9.1f}{args.runs / wall:>9.2f}{base / wall:>14.2f}")
    same = all(v == lines["sequential"] for v in lines.values())
    print(f"every mode printed the same {len(lines['sequential'])} documents: {'yes' if same else 'NO'}; "
          f"load average {os.getloadavg()[0]:.2f} at the end")
    if not same:
        sys.exit(1)


if __name__ == "__main__":
    main()
