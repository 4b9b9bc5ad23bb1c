"""Every rule against a matrix of programs with known problems: true/false positives and negatives.

The matrix: the tutorial's rows at CPU scale (the tiny Transformer), plain Flax/JAX programs
that do not use our workloads (tests/plain_programs.py: a scan without remat, with remat,
unrolled, a step without donation, a recompiling step, one that prints its loss every
iteration, one that copies its batch from the host every time, a clean one), and the
synthetic GPU traces (fixtures/gpu_*). Each entry lists the rules that must fire; every other
rule must stay silent. Prints, per rule, TP / FP / FN / TN and the misses.

    python benchmarks/rule_matrix.py [--skip-record]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PLAIN = ROOT / "tests" / "plain_programs.py"
ACC = "unneeded-grad-accumulation"

# name, how to get the trace, expected findings. --device-memory 1GiB lets the accumulation
# rule judge CPU runs (the tiny step's full batch fits in 1 GiB).
TUTORIAL = [
    ("tutorial: float32, scan, no remat, 4 minibatches",
     ["model.dtype=float32", "model.remat=", "optimizer.num_minibatches=4"],
     {"scan-dynamic-update-slice", "missing-remat", "float32-activations", ACC}),
    ("tutorial: bfloat16, scan, no remat, 4 minibatches",
     ["model.dtype=bfloat16", "model.remat=", "optimizer.num_minibatches=4"],
     {"scan-dynamic-update-slice", "missing-remat", ACC}),
    ("tutorial: bfloat16, unrolled, no remat, 4 minibatches",
     ["model.dtype=bfloat16", "model.scan_layers=false", "model.remat=", "optimizer.num_minibatches=4"],
     {"missing-remat", ACC}),
    ("tutorial: bfloat16, scan, remat MLP+Attn, 4 minibatches",
     ["model.dtype=bfloat16", "model.remat=MLP,Attn", "optimizer.num_minibatches=4"], {ACC}),
    ("tutorial: bfloat16, scan, remat Block, 4 minibatches",
     ["model.dtype=bfloat16", "model.remat=Block", "optimizer.num_minibatches=4"], {"remat-too-broad", ACC}),
    ("tutorial: bfloat16, scan, remat MLP+Attn, 1 minibatch",
     ["model.dtype=bfloat16", "model.remat=MLP,Attn", "optimizer.num_minibatches=1"], set()),
    ("tutorial: float32, remat MLP+Attn, state not donated",
     ["model.remat=MLP,Attn", "train.donate=false"], {"missing-buffer-donation"}),
]
PLAIN_PROGRAMS = [
    ("plain Flax: scan, no remat", ["tower"], {"scan-dynamic-update-slice", "missing-remat", "float32-activations"}),
    ("plain Flax: scan + remat", ["tower", "remat"], {"float32-activations"}),
    ("plain Flax: unrolled, no remat", ["tower", "unrolled"], {"missing-remat", "float32-activations"}),
    ("plain JAX: no donation", ["wide"], {"missing-buffer-donation"}),
    ("plain JAX: donated", ["wide", "donate"], set()),
    ("plain JAX: recompiles every step", ["recompile"], {"recompilation", "host-bound"}),
    ("plain JAX: prints its loss every step", ["print"], {"host-bound", "missing-buffer-donation"}),
    ("plain JAX: copies its batch from host", ["h2d"], {"host-device-transfer", "host-bound"}),
    ("plain JAX: clean loop", ["clean"], set()),
]
GPU = [
    ("GPU (synthetic): scan, no remat", "gpu_scan", {"scan-dynamic-update-slice", "missing-remat", "float32-activations"}),
    ("GPU (synthetic): remat", "gpu_remat", {"float32-activations"}),
    ("GPU (synthetic): H2D copies and idle gaps", "gpu_h2d_idle",
     {"host-bound", "host-device-transfer", "float32-activations"}),
    ("GPU (synthetic): 4 minibatches, room to spare", "gpu_accumulate", {ACC}),
    ("GPU (synthetic): 4 minibatches, near capacity", "gpu_accumulate_near_capacity", set()),
    ("GPU (synthetic): bfloat16, float32 logits", "gpu_bf16", {"float32-attention-logits"}),
    ("GPU (real, AMD): TE fused attention", "../shared/gpu-traces/te_fused_attn", set()),
    ("GPU (real, AMD): attention primitives", "../shared/gpu-traces/jax08_attention", set()),
    ("GPU (real, NVIDIA): TensorFlow BERT", "../shared/gpu-traces/tf_bert_v100_multiworker", set()),
]


def advisor(*args) -> dict:
    proc = subprocess.run([sys.executable, "-m", "advisor.cli", *map(str, args), "--format", "json"],
                          capture_output=True, text=True, cwd=ROOT)
    if proc.returncode != 0:
        raise SystemExit(f"advisor {' '.join(map(str, args))} failed: {proc.stderr.strip()}")
    return json.loads(proc.stdout)


def fired(doc: dict) -> set[str]:
    return {f["rule"] for run in doc["runs"] for f in run["findings"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.parse_args()
    from advisor.engine import all_rules

    rule_ids = [r.id for r in all_rules()]
    observed = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, (name, overrides, expected) in enumerate(TUTORIAL):
            print(f"running {name} ...", file=sys.stderr, flush=True)
            sets = [a for o in overrides for a in ("--set", o)]
            doc = advisor("run-workload", "transformer", *sets, "--steps", "2", "--logdir", Path(tmp) / f"t{i}",
                          "--device-memory", "1GiB")
            observed.append((name, expected, fired(doc)))
        for i, (name, args, expected) in enumerate(PLAIN_PROGRAMS):
            print(f"recording {name} ...", file=sys.stderr, flush=True)
            out = Path(tmp) / f"p{i}"
            subprocess.run([sys.executable, str(PLAIN), args[0], str(out), *args[1:]], check=True, capture_output=True)
            observed.append((name, expected, fired(advisor("analyze", out))))
    for name, folder, expected in GPU:
        path = ROOT / "fixtures" / folder if not folder.startswith("..") else ROOT / folder
        observed.append((name, expected, fired(advisor("analyze", path))))

    print("| program | expected | fired | verdict |")
    print("| --- | --- | --- | --- |")
    for name, expected, got in observed:
        verdict = "ok" if got == expected else f"missed {sorted(expected - got)}, extra {sorted(got - expected)}"
        print(f"| {name} | {', '.join(sorted(expected)) or '-'} | {', '.join(sorted(got)) or '-'} | {verdict} |")
    print()
    print("| rule | TP | FP | FN | TN |")
    print("| --- | --- | --- | --- | --- |")
    for rid in rule_ids:
        tp = sum(rid in e and rid in g for _, e, g in observed)
        fp = sum(rid not in e and rid in g for _, e, g in observed)
        fn = sum(rid in e and rid not in g for _, e, g in observed)
        tn = sum(rid not in e and rid not in g for _, e, g in observed)
        print(f"| `{rid}` | {tp} | {fp} | {fn} | {tn} |")
    wrong = sum(e != g for _, e, g in observed)
    print(f"\n{len(observed)} programs, {wrong} with a false positive or negative")


if __name__ == "__main__":
    main()
