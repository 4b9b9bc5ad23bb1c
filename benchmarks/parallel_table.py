"""Part 2.2's claim on 8 simulated CPU devices: data parallelism against FSDP, measured.

Runs the bundled MLP (the tutorial's shapes: 784 inputs, a 512-wide hidden layer, 10
classes, Adam) with `parallel.data=8`, replicated and then with `parallel.fsdp=true`
(`parallel.fsdp_min_size` as given), each by `advisor run-workload` in its own process, and
reads from advisor's analysis of each trace:
- the train state (parameters + optimizer state) each device holds: the step program's
  updated inputs, per-device shapes from the HLO;
- the collective bytes each device moves per step, by opcode (HLO operand shapes and replica
  groups, ring algorithm);
- the per-device memory peak (XLA's buffer assignment) and the step time (slowest device).

    python benchmarks/parallel_table.py [--width 512] [--min-size 4096] [--steps 3]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run(tmp: Path, name: str, sets: list[str], steps: int) -> Path:
    logdir = tmp / name
    args = [a for s in sets for a in ("--set", s)]
    subprocess.run([sys.executable, "-m", "advisor.cli", "run-workload", "mlp", "--preset", "tiny", *args,
                    "--steps", str(steps), "--logdir", str(logdir), "--format", "json"],
                   check=True, cwd=ROOT, capture_output=True, env={**__import__("os").environ, "XLA_FLAGS": ""})
    return logdir


def measure(logdir: Path) -> dict:
    from advisor.engine import analyze_path
    from advisor.views import step_time

    (analysis,) = analyze_path(logdir)
    p = analysis.profile
    module = p.modules[p.step_module]
    devices = len(p.device_totals)
    state = sum(module.parameter_bytes[n] for n in module.updated_parameters)
    by_opcode: dict[str, int] = {}
    for ins in module.collectives():
        by_opcode[ins.collective] = by_opcode.get(ins.collective, 0) + ins.bytes_moved(devices)
    return {"devices": devices, "state": state, "peak": p.memory.peak_bytes if p.memory else None,
            "collectives": by_opcode, "step_ms": step_time.of(p).median_ns / 1e6}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--width", type=int, default=512)
    ap.add_argument("--min-size", type=int, default=4096, help="parallel.fsdp_min_size (elements)")
    ap.add_argument("--steps", type=int, default=3)
    args = ap.parse_args()
    base = ["parallel.data=8", "data.num_inputs=784", f"model.hidden_size={args.width}", "data.num_classes=10",
            "data.batch_size=512"]
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, extra in (("data parallel", []), ("FSDP", ["parallel.fsdp=true",
                                                             f"parallel.fsdp_min_size={args.min_size}"])):
            print(f"running {name} ...", file=sys.stderr, flush=True)
            rows[name] = measure(run(Path(tmp), name.replace(" ", "_"), base + extra, args.steps))
    mib = 2 ** 20
    print("| setup | devices | state per device | peak per device | collective bytes per device per step | "
          "step time |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name, r in rows.items():
        coll = ", ".join(f"{k} {v / mib:.2f} MiB" for k, v in sorted(r["collectives"].items())) or "none"
        print(f"| {name} | {r['devices']} | {r['state'] / mib:.2f} MiB | {r['peak'] / mib:.2f} MiB | {coll} | "
              f"{r['step_ms']:.1f} ms |")
    dp, fs = rows["data parallel"], rows["FSDP"]
    print(f"\nstate per device: FSDP holds {fs['state'] / dp['state']:.3f} of data parallelism's "
          f"(1/{dp['devices']} = {1 / dp['devices']:.3f} for the sharded leaves)")


if __name__ == "__main__":
    main()
