"""--verify's step-time noise before and after the paired engine, measured side by side beside a busy core.

Old style (advisor before issue 38): the run as it is and the run with the change are each profiled
once, one after the other; the ratio is the ratio of their median profiled steps and the noise the
larger relative spread of either run's steps (advisor/compare.py). New style (advisor/timing.py):
the change timed against the run as it is in interleaved paired rounds by two worker processes a
side used in turns; the ratio is the median paired ratio and the noise its 90% band's half-width.

Each style measures the same changes `--repeats` times back to back, while a neighbour process of
this script's own keeps one core busy (a Python busy loop, ended by the script, bounded by
--neighbour-s). The table prints each run's ratio and stated noise, and whether the back-to-back
runs agree within the noise they state: every two runs' bands (ratio ± noise) overlap, and, stricter,
every run's ratio lies inside every other run's band.

    flock /tmp/advisor-heavy.lock .venv/bin/python benchmarks/verify_noise.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHANGES = ["model.remat=MLP+Attn", "model.scan_layers=false"]
BUSY = "import time\nend = time.monotonic() + {s}\nwhile time.monotonic() < end:\n    pass\n"


def old_style(logdir: Path, changes: list[str]) -> dict[str, tuple[float, float]]:
    """One profiled run as it is, one per change: (ratio of median steps, the larger relative spread)."""
    from advisor import workloads
    from advisor.compare import compare, metrics
    from advisor.engine import analyze_path
    from advisor.job import Job
    from advisor.runner import profile_workload

    def run(items):
        run_dir = profile_workload("transformer", "tiny", workloads.resolve("transformer", "tiny", items),
                                   logdir, lambda m: None)
        (doc,) = analyze_path(run_dir, Job(documents=True))
        return metrics(doc)

    base = run([])
    out = {}
    for change in changes:
        c = compare(base, run([change]))
        out[change] = (c.step_time_ratio, c.noise)
    return out


def new_style(changes: list[str]) -> dict[str, tuple[float, float]]:
    """Each change timed against the run as it is by the paired engine: (median paired ratio, noise)."""
    from advisor.timing import Reference

    spec = lambda items: {"workload": "transformer", "preset": "tiny", "overrides": items}  # noqa: E731
    out = {}
    with Reference(spec([])) as ref:
        for change in changes:
            m = ref.time(spec([change]), change)
            out[change] = (m.ratio, m.noise)
    return out


def agree(runs: list[tuple[float, float]], strict: bool = False) -> bool:
    """Every two runs' bands overlap (ratio ± stated noise); strict: every run's ratio inside every
    other run's band."""
    return all(abs(ri - rj) <= ni * ri + (0 if strict else nj * rj) for ri, ni in runs for rj, nj in runs)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--neighbour-s", type=float, default=1200.0, help="the busy neighbour's longest life")
    args = ap.parse_args()
    neighbour = subprocess.Popen([sys.executable, "-c", BUSY.format(s=args.neighbour_s)])
    results: dict[str, dict[str, list]] = {"old": {c: [] for c in CHANGES}, "new": {c: [] for c in CHANGES}}
    took = {"old": 0.0, "new": 0.0}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for i in range(args.repeats):        # the two styles alternate, so both see the same load
                for style in ("old", "new"):
                    t0 = time.monotonic()
                    got = old_style(Path(tmp) / f"r{i}", CHANGES) if style == "old" else new_style(CHANGES)
                    took[style] += time.monotonic() - t0
                    for change, (ratio, noise) in got.items():
                        results[style][change].append((ratio, noise))
                        print(f"run {i + 1} {style}: {change} x{ratio:.3f} noise {noise:.1%}", flush=True)
    finally:
        neighbour.kill()
        neighbour.wait()
    print()
    print(f"transformer (tiny), {args.repeats} back-to-back runs per style beside one busy core")
    print(f"{'style':<6} {'change':<26} {'ratios':<26} {'stated noise':<20} {'spread of ratios':>16}"
          "  bands overlap  each inside the others' band")
    for style in ("old", "new"):
        for change in CHANGES:
            runs = results[style][change]
            ratios = [r for r, _ in runs]
            spread = (max(ratios) - min(ratios)) / statistics.median(ratios)
            print(f"{style:<6} {change:<26} {' '.join(f'x{r:.2f}' for r, _ in runs):<26} "
                  f"{' '.join(f'{n:.0%}' for _, n in runs):<20} {spread:>16.1%}  "
                  f"{'yes' if agree(runs) else 'no':<13}  {'yes' if agree(runs, True) else 'no'}")
    print(f"wall time: old style {took['old']:.0f} s, new style {took['new']:.0f} s ({args.repeats} runs each)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
