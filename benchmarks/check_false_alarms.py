"""False alarms and caught regressions of `advisor check`'s step-time verdict, quiet and loaded.

Four cells, run in turn (one run of each, then the next round) so each sees the same machine:
  unchanged   the tiny Transformer (remat MLP+Attn, the configuration .ci/run checks) against itself:
              a failure is a false alarm;
  bfloat16    the same with --set model.dtype=bfloat16, really slower on CPU: a failure is a catch;
each quiet and with --load N busy neighbour processes (`while True: pass`) that this script
starts and always stops.

By default each run is the step-time judgement as `advisor check --workload` makes it
(interleaved rounds, the paired verdict, more rounds when undecided) on timing workers started
once (a base, an unchanged and a bfloat16 candidate) so that a run costs its rounds, not three
JAX start-ups and compiles. --fresh starts new timing workers for every run, as the command
does (two a side), and measures a slowdown or a still undecided verdict again with fresh
workers, as the command does (two processes running the same step can differ by about 10% for
as long as they live, which long-lived workers never show). --full runs the whole
`advisor check` command each time (fresh workers, profile, analysis, memory and findings too).
Each first runs one full check of the bfloat16 arm to show what memory and findings say about it.

    nice -n 5 python benchmarks/check_false_alarms.py [--runs 20] [--load 1] [--fresh | --full]
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CONFIG = ["model.remat=MLP+Attn"]
SLOWER = ["model.dtype=bfloat16"]
BUDGET = 0.10        # the check's default --max-step-time-regression


def cli_check(extra: list[str], baseline: Path) -> tuple[bool, float | None, list[str]]:
    args = ["--workload", "transformer", "--preset", "tiny"]
    for item in CONFIG + extra:
        args += ["--set", item]
    proc = subprocess.run([sys.executable, "-m", "advisor.cli", "check", *args, "--baseline", str(baseline),
                           "--format", "json"], capture_output=True, text=True)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"advisor check exited {proc.returncode}: {proc.stderr.strip()[-400:]}")
    doc = json.loads(proc.stdout)["check"]
    failed = [c["name"] for c in doc["checks"] if not c["passed"]]
    ratios = (doc.get("step_time") or {}).get("ratios") or []
    return ("budget:step-time" in failed, (statistics.median(ratios) if ratios else None), failed,
            " ".join(f"{r:.2f}" for r in ratios))


def time_check(base, new) -> tuple[bool, float | None, list[str]]:
    from advisor.timing import measure, paired_verdict

    timing = measure(base, new, BUDGET)
    verdict = paired_verdict(timing, BUDGET)
    ratios = " ".join(f"{r:.2f}" for r in timing.ratios())
    return verdict.regressed, verdict.ratio, ["budget:step-time"] if verdict.regressed else [], ratios


def fresh_check(extra: list[str]) -> tuple[bool, float | None, list[str]]:
    """The step-time path of `advisor check --workload` on a new pair of workers: measure, and
    confirm a slowdown with another new pair."""
    from advisor.timing import confirm, measure, paired_verdict, start_sides

    spec = {"workload": "transformer", "preset": "tiny", "overrides": CONFIG}
    new = {**spec, "overrides": CONFIG + extra}
    pairs = []

    def start_pair():
        pairs.append(start_sides(spec, new))
        return pairs[-1]
    try:
        first = measure(*start_pair(), BUDGET)
        timing, _ = confirm(first, start_pair, BUDGET)
    finally:
        for pair in pairs:
            for w in pair:
                w.close()
    verdict = paired_verdict(timing, BUDGET)
    ratios = (" ".join(f"{r:.2f}" for r in timing.ratios())
              + (" (measured again by fresh workers)" if len(pairs) > 1 else ""))
    return verdict.regressed, verdict.ratio, ["budget:step-time"] if verdict.regressed else [], ratios


def start_load(n: int) -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def stop_load(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        p.kill()
        p.wait()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=20, help="runs per cell")
    ap.add_argument("--load", type=int, default=1, help="busy neighbour processes in the loaded cells")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--fresh", action="store_true", help="new timing workers for every run, as the command")
    mode.add_argument("--full", action="store_true", help="run the whole `advisor check` command each time")
    ap.add_argument("--skip-first-check", action="store_true",
                    help="skip the first full check of the bfloat16 arm (memory and findings)")
    args = ap.parse_args()
    results: dict[tuple[str, str], list[tuple[bool, float | None]]] = {}
    t0 = time.perf_counter()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))   # so the finally blocks stop the load
    workers = {}
    if not (args.full or args.fresh):
        from advisor.timing import Worker
        spec = {"workload": "transformer", "preset": "tiny", "overrides": CONFIG}
        workers = {"base": Worker(spec, label="base"), "unchanged": Worker(spec, label="unchanged"),
                   "bfloat16": Worker({**spec, "overrides": CONFIG + SLOWER}, label="bfloat16")}
    try:
        run_cells(args, results, workers)
    finally:   # stopped early (SIGTERM, Ctrl-C): still the table of the runs done
        for w in workers.values():
            w.close()
        report(args, results, t0)


def run_cells(args, results, workers) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        baseline = Path(tmp) / "baseline.json"
        if args.full or not args.skip_first_check:
            args_w = ["--workload", "transformer", "--preset", "tiny", "--set", CONFIG[0]]
            proc = subprocess.run([sys.executable, "-m", "advisor.cli", "check", *args_w, "--write-baseline",
                                   str(baseline)], capture_output=True, text=True)
            assert proc.returncode == 0, proc.stderr
        if not args.skip_first_check:
            _, ratio, failed, _ = cli_check(SLOWER, baseline)
            print(f"full check of the bfloat16 arm: step time x{ratio:.3f}, failed: {', '.join(failed) or 'nothing'}",
                  flush=True)
        for i in range(args.runs):
            for load_name, n in (("quiet", 0), (f"load {args.load}", args.load)):
                for arm, extra in (("unchanged", []), ("bfloat16", SLOWER)):
                    procs = start_load(n)
                    try:
                        failed_time, ratio, failed, rounds = (
                            cli_check(extra, baseline) if args.full else fresh_check(extra) if args.fresh
                            else time_check(workers["base"], workers[arm]))
                    finally:
                        stop_load(procs)
                    results.setdefault((arm, load_name), []).append((failed_time, ratio))
                    print(f"run {i + 1:2d} {load_name:7s} {arm:9s}: step time x{ratio:.3f} "
                          f"{'FAIL' if failed_time else 'pass'}"
                          + (f" (failed: {', '.join(failed)})" if failed else "") + f"; rounds: {rounds}",
                          flush=True)


def report(args, results, t0) -> None:
    kind = "full checks" if args.full else "step-time verdicts, fresh workers" if args.fresh else "step-time verdicts"
    print(f"\n{kind}, budget +{BUDGET:.0%}, "
          f"{time.perf_counter() - t0:.0f} s")
    print(f"{'':22s}{'quiet':>22s}{'load ' + str(args.load):>22s}")
    for arm, label in (("unchanged", "false alarms"), ("bfloat16", "caught regressions")):
        cells = []
        for load_name in ("quiet", f"load {args.load}"):
            rows = results.get((arm, load_name), [])
            ratios = [r for _, r in rows if r is not None]
            span = f" (x{min(ratios):.2f}-x{max(ratios):.2f})" if ratios else ""
            cells.append(f"{sum(f for f, _ in rows)}/{len(rows)}{span}")
        print(f"{label + ' (' + arm + ')':22s}" + "".join(f"{c:>22s}" for c in cells))


if __name__ == "__main__":
    main()
