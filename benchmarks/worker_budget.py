"""What one analysis of the Advisor tab and `advisor serve` takes, measured as its budget measures it:
wall time, and the peak private memory (resident, not shared: the trace's mapped pages are not
counted) of the worker and its children together (jobs.private_mib), sampled every 50 ms, against the
default budget. The traces: fixtures/transformer_scan, the tutorial notebook's H200 trace, and a
longer CPU trace made from a recording by benchmarks/longer_trace.py (--copies times its host plane),
then a file of zeros as large as the longest (refused at its first bytes).

    flock /tmp/advisor-heavy.lock python benchmarks/worker_budget.py [--copies 200]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from advisor.tensorboard import cache  # noqa: E402
from advisor.tensorboard.jobs import DEFAULT_MEMORY_MB, DEFAULT_SECONDS, Budget, Jobs, private_mib  # noqa: E402
from advisor.tensorboard.runs import read_run  # noqa: E402

SCAN = next((ROOT / "fixtures" / "transformer_scan" / "plugins" / "profile").iterdir())
H200 = ROOT.parent / "shared" / "h100-traces" / "tutorial_notebook_unrolled_h200"


def measure(run: Path) -> tuple[float, float, str]:
    """(seconds, peak private MiB, outcome) of one analysis of the run folder by a Jobs worker."""
    jobs = Jobs(workers=1, budget=Budget(seconds=DEFAULT_SECONDS * 10, memory_mb=DEFAULT_MEMORY_MB * 10))
    key = cache.run_key(read_run(run, run.name).files())
    peak, done = 0.0, threading.Event()

    def sample():
        nonlocal peak
        while not done.is_set():
            with jobs._lock:
                pids = [c.pid for c in jobs._children]
            for pid in pids:
                peak = max(peak, private_mib(pid))
            time.sleep(0.05)

    threading.Thread(target=sample, daemon=True).start()
    t = time.perf_counter()
    jobs.submit(key, "analyze", str(run), "{}")
    while (st := jobs.status(key))["state"] not in ("done", "failed"):
        time.sleep(0.05)
    took = time.perf_counter() - t
    done.set()
    doc = cache.read(key) or {}
    reason = doc.get("failed", {}).get("reason", "")
    outcome = st.get("error") or (f"refused: {reason[reason.find('not a trace'):]}" if reason else "analyzed")
    return took, peak, outcome


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--copies", type=int, default=200,
                    help="the longer trace: this many times fixtures/transformer_scan")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="advisor-budget-bench-"))
    os.environ["ADVISOR_CACHE_DIR"] = str(work / "cache")
    try:
        runs = []
        scan = work / "scan"
        shutil.copytree(SCAN, scan)
        runs.append(("fixtures/transformer_scan", scan))
        h200 = next((H200 / "plugins" / "profile").iterdir(), None) if H200.is_dir() else None
        if h200 is not None:
            runs.append(("tutorial notebook, H200", h200))
        longer = work / "longer"
        longer.mkdir()
        subprocess.run([sys.executable, str(ROOT / "benchmarks" / "longer_trace.py"), str(SCAN / "vm.xplane.pb"),
                        str(longer / "vm.xplane.pb"), str(args.copies)], check=True, capture_output=True)
        runs.append((f"transformer_scan x{args.copies} (longer_trace.py)", longer))
        zeros = work / "zeros"
        zeros.mkdir()
        with open(zeros / "vm.xplane.pb", "wb") as f:
            f.truncate((longer / "vm.xplane.pb").stat().st_size)
        runs.append(("zeros, as large", zeros))
        print(f"default budget: {DEFAULT_SECONDS:g} s, {DEFAULT_MEMORY_MB:,.0f} MiB of private memory "
              "(worker and children)")
        print(f"{'trace':<42} {'size':>10} {'wall':>8} {'peak private':>13}  outcome")
        for label, run in runs:
            size = sum(f.stat().st_size for f in run.glob("*.xplane.pb")) / 2**20
            took, peak, outcome = measure(run)
            print(f"{label:<42} {size:8.1f} MiB {took:6.2f} s {peak:9.0f} MiB  {outcome[:100]}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
