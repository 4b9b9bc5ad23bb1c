"""How often `advisor check` fails an unchanged tree: its false-alarm rate on this machine.

Writes a baseline from one run of the tiny Transformer (remat MLP,Attn, the configuration
.ci/run checks), then runs `advisor check --workload ...` against it N times, unchanged,
and prints how many failed and the step-time ratios it saw. Then, as a sanity check, one
run with remat switched off, which must fail.

    python benchmarks/check_false_alarms.py [--runs 20] [--baseline .ci/advisor-baseline.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WORKLOAD = ["--workload", "transformer", "--preset", "tiny", "--set", "model.remat=MLP,Attn"]


def check(*args: str) -> tuple[int, dict]:
    proc = subprocess.run([sys.executable, "-m", "advisor.cli", "check", *args, "--format", "json"],
                          capture_output=True, text=True)
    doc = json.loads(proc.stdout) if proc.stdout.strip().startswith("{") else {}
    return proc.returncode, doc


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--baseline", type=Path, default=None, help="use this baseline instead of writing a fresh one")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        baseline = args.baseline or Path(tmp) / "baseline.json"
        if args.baseline is None:
            proc = subprocess.run([sys.executable, "-m", "advisor.cli", "check", *WORKLOAD,
                                   "--write-baseline", str(baseline)], capture_output=True, text=True)
            assert proc.returncode == 0, proc.stderr
        failures, ratios, noises = 0, [], []
        t0 = time.perf_counter()
        for i in range(args.runs):
            rc, doc = check(*WORKLOAD, "--baseline", str(baseline))
            comp = doc.get("comparison") or {}
            ratios.append(comp.get("step_time_ratio"))
            noises.append(comp.get("step_time_noise"))
            failed = [c["name"] for c in doc.get("checks", []) if not c["passed"]]
            failures += rc != 0
            print(f"run {i + 1:2d}: exit {rc}, step-time ratio {ratios[-1]}, noise {noises[-1]}"
                  + (f", failed: {', '.join(failed)}" if failed else ""), flush=True)
        rc_off, doc_off = check("--workload", "transformer", "--preset", "tiny", "--set", "model.remat=",
                                "--baseline", str(baseline))
    ok = [r for r in ratios if r is not None]
    print(f"unchanged runs: {args.runs}, failed: {failures}, false-alarm rate {failures / args.runs:.0%} "
          f"({time.perf_counter() - t0:.0f} s)")
    if ok:
        print(f"step-time ratio to the baseline: median {statistics.median(ok):.3f}, "
              f"min {min(ok):.3f}, max {max(ok):.3f}")
    failed_off = [c["message"] for c in doc_off.get("checks", []) if not c["passed"]]
    print(f"remat switched off: exit {rc_off}; " + "; ".join(failed_off))


if __name__ == "__main__":
    main()
