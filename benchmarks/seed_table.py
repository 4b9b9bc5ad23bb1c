"""Reproduce the tutorial's table (../shared/SEED_TABLE.md) at a scale this machine runs.

Runs the tutorial's rows: float32; bfloat16; unscanned; remat MLP+Attn; remat Block;
1 minibatch (each differing from its parent row as in the tutorial), and writes a Markdown
table: our peak memory and step time, our ratios to the first row beside the tutorial's,
and whether each row's change moved peak memory and step time in the tutorial's direction.

    python benchmarks/seed_table.py            # the `small` preset on CPU; the tutorial's `seed` on a GPU
    python benchmarks/seed_table.py --quick    # the `tiny` preset: about a minute on 2 CPU cores
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

OUT = Path(__file__).resolve().parent / "out" / "seed_table.md"

# label, overrides, parent row, tutorial (peak GB, step s)
ROWS = [
    ("float32, scan, no remat, 4 minibatches",
     ["model.dtype=float32", "model.scan_layers=true", "model.remat=none", "optimizer.num_minibatches=4"], None,
     (20.6, 2.1)),
    ("**bfloat16**", ["model.dtype=bfloat16", "model.scan_layers=true", "model.remat=none",
                      "optimizer.num_minibatches=4"], 0, (14.6, 1.1)),
    ("bfloat16, **no scan**", ["model.dtype=bfloat16", "model.scan_layers=false", "model.remat=none",
                               "optimizer.num_minibatches=4"], 1, (8.8, 0.73)),
    ("bfloat16, scan, **remat MLP+Attn**", ["model.dtype=bfloat16", "model.scan_layers=true", "model.remat=MLP+Attn",
                                            "optimizer.num_minibatches=4"], 1, (3.9, 0.91)),
    ("bfloat16, scan, **remat Block**", ["model.dtype=bfloat16", "model.scan_layers=true", "model.remat=Block",
                                         "optimizer.num_minibatches=4"], 3, (3.8, 0.96)),
    ("bfloat16, scan, remat MLP+Attn, **1 minibatch**", ["model.dtype=bfloat16", "model.scan_layers=true",
                                                         "model.remat=MLP+Attn", "optimizer.num_minibatches=1"],
     3, (6.2, 0.86)),
]


def measure(preset: str, overrides: list[str], steps: int, logdir: Path) -> tuple[float, int, list[str]]:
    from advisor import runner, workloads
    from advisor.compare import metrics
    from advisor.engine import analyze_path

    config = workloads.resolve("transformer", preset, overrides + [f"train.steps={steps}"])
    run_dir = runner.profile_workload("transformer", preset, config, logdir)
    (analysis,) = analyze_path(run_dir)
    m = metrics(analysis.document())
    return statistics.median(analysis.profile.run_metadata["step_wall_ms"]), m.peak_memory_bytes, sorted(m.findings)


def direction(ratio: float, tol: float) -> str:
    return "down" if ratio < 1 - tol else "up" if ratio > 1 + tol else "same"


def main() -> None:
    import jax

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="the tiny preset: for CI-friendly time")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    backend = jax.default_backend()
    preset = "tiny" if args.quick else ("seed" if backend == "gpu" else "small")
    results = []
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        for label, overrides, parent, tutorial in ROWS:
            print(f"running: {label.replace('*', '')} ...", file=sys.stderr, flush=True)
            step_ms, peak, findings = measure(preset, overrides, args.steps, Path(tmp))
            results.append((label, parent, tutorial, step_ms, peak, findings))
    first_step, first_peak = results[0][3], results[0][4]
    lines = [
        f"Measured on {backend} ({jax.devices()[0].device_kind}), preset `{preset}`, median of {args.steps} "
        f"profiled steps (wall time per step), peak memory from XLA's buffer assignment; "
        f"{time.perf_counter() - t0:.0f} s in all.",
        "",
        "| row | peak memory | step time | peak / row 1 | tutorial | step / row 1 | tutorial "
        "| this row's change: memory (ours / tutorial) | step time (ours / tutorial) | findings |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    t_peak0, t_step0 = ROWS[0][3]
    for label, parent, (t_peak, t_step), step_ms, peak, findings in results:
        if parent is None:
            mem_effect = step_effect = "(first row)"
        else:
            p = results[parent]
            ours_m = direction(peak / p[4], 0.02)
            ours_s = direction(step_ms / p[3], 0.05)
            tut_m = direction(t_peak / ROWS[parent][3][0], 0.02)
            tut_s = direction(t_step / ROWS[parent][3][1], 0.05)
            mem_effect = f"{ours_m} / {tut_m} " + ("(agrees)" if ours_m == tut_m else "(**differs**)")
            step_effect = f"{ours_s} / {tut_s} " + ("(agrees)" if ours_s == tut_s else "(**differs**)")
        lines.append(
            f"| {label} | {peak / 2**20:.1f} MiB | {step_ms:.1f} ms | x{peak / first_peak:.2f} "
            f"| x{t_peak / t_peak0:.2f} | x{step_ms / first_step:.2f} | x{t_step / t_step0:.2f} | {mem_effect} "
            f"| {step_effect} | {', '.join(findings) or 'none'} |")
    table = "\n".join(lines) + "\n"
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(table)
    print(table)
    print(f"written to {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
