"""Every rule against a matrix of programs with known problems: true/false positives and negatives.

The matrix: the tutorial's rows at CPU scale (the tiny Transformer), plain Flax/JAX programs
that do not use our workloads (tests/plain_programs.py: a scan without remat, with remat,
unrolled, a step without donation, a recompiling step, one that prints its loss every
iteration, one that copies its batch from the host every time, a clean one), and the
synthetic GPU traces (fixtures/gpu_*), the real GPU traces (fixtures/gpu-traces, or
../shared/gpu-traces where that is missing), and the corpus (tests/corpus/: programs written
the way users write them, traces in fixtures/corpus/, verdicts in tests/corpus/expectations.py),
and the many-device traces (fixtures/parallel/: 8 simulated CPU devices, and two hosts).
Each entry lists the rules that must fire; every other rule must stay silent, except where a
corpus verdict says "at most <severity>": there silence or a finding up to that severity is
right (counted TN), a more severe one is a false positive. Prints, per rule, TP / FP / FN / TN
and every wrong case with its reason.

    python benchmarks/rule_matrix.py [--corpus-only]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
PLAIN = ROOT / "tests" / "plain_programs.py"
ACC = "unneeded-grad-accumulation"
REMAT, ATTN = "unneeded-remat", "unfused-attention"

# name, how to get the trace, expected findings. --device-memory 1GiB lets the accumulation
# rule judge CPU runs (the tiny step's full batch fits in 1 GiB).
TUTORIAL = [
    ("tutorial: float32, scan, no remat, 4 minibatches",
     ["model.dtype=float32", "model.remat=none", "optimizer.num_minibatches=4"],
     {"scan-dynamic-update-slice", "missing-remat", "float32-activations", ACC}),
    ("tutorial: bfloat16, scan, no remat, 4 minibatches",
     ["model.dtype=bfloat16", "model.remat=none", "optimizer.num_minibatches=4"],
     {"scan-dynamic-update-slice", "missing-remat", ACC}),
    ("tutorial: bfloat16, unrolled, no remat, 4 minibatches",
     ["model.dtype=bfloat16", "model.scan_layers=false", "model.remat=none", "optimizer.num_minibatches=4"],
     {"missing-remat", ACC}),
    ("tutorial: bfloat16, scan, remat MLP+Attn, 4 minibatches",
     ["model.dtype=bfloat16", "model.remat=MLP+Attn", "optimizer.num_minibatches=4"], {ACC}),
    ("tutorial: bfloat16, scan, remat Block, 4 minibatches",
     ["model.dtype=bfloat16", "model.remat=Block", "optimizer.num_minibatches=4"], {"remat-too-broad", ACC}),
    ("tutorial: bfloat16, scan, remat MLP+Attn, 1 minibatch",
     ["model.dtype=bfloat16", "model.remat=MLP+Attn", "optimizer.num_minibatches=1"], set()),
    ("tutorial: float32, remat MLP+Attn, state not donated",
     ["model.remat=MLP+Attn", "train.donate=false"], {"missing-buffer-donation"}),
]
PLAIN_PROGRAMS = [
    ("plain Flax: scan, no remat", ["tower"], {"scan-dynamic-update-slice", "missing-remat", "float32-activations"}),
    ("plain Flax: scan + remat", ["tower", "remat"], {"float32-activations"}),
    ("plain Flax: unrolled, no remat", ["tower", "unrolled"], {"missing-remat", "float32-activations"}),
    ("plain JAX: no donation", ["wide"], {"missing-buffer-donation"}),
    ("plain JAX: donated", ["wide", "donate"], set()),
    ("plain JAX: recompiles every step", ["recompile"], {"recompilation", "host-bound"}),
    # its undonated weight is 1 MiB: under the 4 MiB a donation finding needs (advisor/remedies.py)
    ("plain JAX: prints its loss every step", ["print"], {"host-bound"}),
    ("plain JAX: copies its batch from host", ["h2d"], {"host-device-transfer", "host-bound"}),
    ("plain JAX: clean loop", ["clean"], set()),
]
GPU = [
    # the tiny Transformer materializes its attention scores: unfused-attention (info where float32) on each
    ("GPU (synthetic): scan, no remat", "gpu_scan",
     {"scan-dynamic-update-slice", "missing-remat", "float32-activations", ATTN}),
    # the tiny Transformer on an H100 runs 2,000+ kernels under 10 us per step: launch-bound; its remat
    # buys nothing on 80 GB: unneeded-remat
    ("GPU (synthetic): remat", "gpu_remat", {"float32-activations", "launch-bound", REMAT, ATTN}),
    ("GPU (synthetic): H2D copies and idle gaps", "gpu_h2d_idle",
     {"host-bound", "host-device-transfer", "float32-activations", "launch-bound", REMAT, ATTN}),
    ("GPU (synthetic): 4 minibatches, room to spare", "gpu_accumulate", {ACC, "launch-bound", REMAT, ATTN}),
    ("GPU (synthetic): 4 minibatches, near capacity", "gpu_accumulate_near_capacity", {"launch-bound", ATTN}),
    ("GPU (synthetic): bfloat16, float32 logits", "gpu_bf16",
     {"float32-attention-logits", "launch-bound", REMAT, ATTN}),
    ("GPU (synthetic): 8 GPUs, data parallel, NCCL all-reduce", "gpu_data_parallel", {"replicated-state"}),
    ("GPU (synthetic): 8 GPUs, GPU 3 computes 4x", "gpu_straggler", {"replicated-state", "device-imbalance"}),
    ("GPU (real, AMD): TE fused attention", "gpu-traces/te_fused_attn", set()),
    ("GPU (real, AMD): attention primitives", "gpu-traces/jax08_attention", set()),
    ("GPU (real, NVIDIA): TensorFlow BERT", "gpu-traces/tf_bert_v100_multiworker", set()),
    ("GPU (real, H100): seed Transformer, scan + remat, 4 minibatches", "h100-traces/transformer_seed",
     {ACC, REMAT, ATTN}),
    ("GPU (real, H100): cuDNN fused attention", "h100-traces/attention_cudnn", {"host-bound"}),
    ("GPU (real, H100): one bf16 GEMM", "h100-traces/gemm_bf16_8192", set()),
    ("GPU (real, H200): the tutorial's notebook, unrolled, no remat", "h100-traces/tutorial_notebook_unrolled_h200",
     {ACC, "missing-remat", ATTN}),
]

# Many devices: programs on 8 simulated CPU devices and a two-host run (fixtures/record_parallel.py).
EXPOSED, REPLICATED, IMBALANCE = "exposed-communication", "replicated-state", "device-imbalance"
PARALLEL = [
    ("8 devices: data parallel, replicated Adam state", "parallel/data_parallel", {REPLICATED, EXPOSED}),
    ("8 devices: FSDP (state sharded)", "parallel/fsdp", {EXPOSED}),
    ("8 devices: jax.pmap, a copy of the state per device", "parallel/pmap_data_parallel", {REPLICATED}),
    ("8 devices: one device with 64x the work", "parallel/straggler", {IMBALANCE}),
    ("8 devices: 8 MiB all-reduce, 2 examples per device", "parallel/comm_bound", {REPLICATED, EXPOSED}),
    ("8 devices: compute-bound, small state", "parallel/compute_bound", set()),
    ("2 hosts x 4 devices (gloo)", "parallel/two_hosts", {EXPOSED}),
    ("2 hosts x 4 devices, host1 slow", "parallel/two_hosts_straggler", {IMBALANCE, EXPOSED}),
    ("2 hosts x 4 devices, host1's input 40 ms late", "parallel/two_hosts_slow_input", {IMBALANCE, EXPOSED}),
]


def gpu_path(folder: str) -> Path:
    """fixtures/<folder>; the real traces fall back to ../shared/gpu-traces in older checkouts."""
    path = ROOT / "fixtures" / folder
    if not path.exists() and folder.startswith("gpu-traces/"):
        path = ROOT.parent / "shared" / folder
    return path


def corpus_rows() -> list[tuple[str, set, dict, dict]]:
    """(name, rules that must fire, findings' severities by rule, verdict by rule) per corpus program."""
    from advisor.engine import analyze_all
    from advisor.job import Job
    from advisor.rules import ALL
    from advisor.settings import Settings
    from corpus.expectations import CASES, expectation
    from corpus.traces import materialize

    rule_ids = [r.id for r in ALL]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for case in CASES:
            print(f"analyzing corpus {case} ...", file=sys.stderr, flush=True)
            analyses, failed = analyze_all(materialize(case, Path(tmp)),
                                           Job(settings=Settings(device_memory=CASES[case].get("device_memory"))))
            if failed:
                raise SystemExit(f"corpus {case}: {failed[0].reason}")
            sev: dict[str, list[str]] = {}
            for f in analyses[0].findings:
                sev.setdefault(f.rule, []).append(f.severity)
            verdicts = {rid: expectation(case, rid) for rid in rule_ids}
            expected = {rid for rid, (v, _) in verdicts.items() if v == "fire"}
            rows.append((f"corpus: {case}", expected, sev, verdicts))
    return rows


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
    ap.add_argument("--corpus-only", action="store_true",
                    help="only the corpus (skip recording the tutorial rows and the plain programs)")
    args = ap.parse_args()
    from advisor.rules import ALL
    from corpus.expectations import satisfied

    rule_ids = [r.id for r in ALL]
    observed = []
    # name -> rule -> (verdict, reason) for rows judged by verdicts rather than an expected set
    verdicts: dict[str, dict] = {}
    severities: dict[str, dict] = {}
    if not args.corpus_only:
        with tempfile.TemporaryDirectory() as tmp:
            for i, (name, overrides, expected) in enumerate(TUTORIAL):
                print(f"running {name} ...", file=sys.stderr, flush=True)
                sets = [a for o in overrides for a in ("--set", o)]
                doc = advisor("run-workload", "transformer", *sets, "--steps", "2", "--logdir", Path(tmp) / f"t{i}",
                              "--device-memory", "1GiB")
                observed.append((name, expected, fired(doc)))
            for i, (name, prog, expected) in enumerate(PLAIN_PROGRAMS):
                print(f"recording {name} ...", file=sys.stderr, flush=True)
                out = Path(tmp) / f"p{i}"
                subprocess.run([sys.executable, str(PLAIN), prog[0], str(out), *prog[1:]], check=True,
                               capture_output=True)
                observed.append((name, expected, fired(advisor("analyze", out))))
        for name, folder, expected in GPU:
            observed.append((name, expected, fired(advisor("analyze", gpu_path(folder)))))
        for name, folder, expected in PARALLEL:
            observed.append((name, expected, fired(advisor("analyze", ROOT / "fixtures" / folder))))
    for name, expected, sev, verdict in corpus_rows():
        observed.append((name, expected, set(sev)))
        verdicts[name], severities[name] = verdict, sev

    def ok(name, rid, expected, got):
        if name in verdicts:
            return satisfied(verdicts[name][rid][0], severities[name].get(rid, []))
        return (rid in expected) == (rid in got)

    def wrong(name, expected, got):
        return [rid for rid in rule_ids if not ok(name, rid, expected, got)]

    print("| program | expected | fired | verdict |")
    print("| --- | --- | --- | --- |")
    for name, expected, got in observed:
        bad = wrong(name, expected, got)
        missed = [r for r in bad if r in expected]
        extra = [r for r in bad if r not in expected]
        verdict = "ok" if not bad else f"missed {missed}, extra {extra}"
        print(f"| {name} | {', '.join(sorted(expected)) or '-'} | {', '.join(sorted(got)) or '-'} | {verdict} |")
    print()
    print("| rule | TP | FP | FN | TN |")
    print("| --- | --- | --- | --- | --- |")
    for rid in rule_ids:
        good = [ok(n, rid, e, g) for n, e, g in observed]
        tp = sum(rid in e and k for (_, e, _), k in zip(observed, good))
        fn = sum(rid in e and not k for (_, e, _), k in zip(observed, good))
        fp = sum(rid not in e and not k for (_, e, _), k in zip(observed, good))
        tn = sum(rid not in e and k for (_, e, _), k in zip(observed, good))
        print(f"| `{rid}` | {tp} | {fp} | {fn} | {tn} |")
    bad_rows = [(n, e, g) for n, e, g in observed if wrong(n, e, g)]
    print(f"\n{len(observed)} programs, {len(bad_rows)} with a false positive or negative")
    for name, expected, got in bad_rows:
        for rid in wrong(name, expected, got):
            if name in verdicts:
                verdict, reason = verdicts[name][rid]
                sev = severities[name].get(rid) or "nothing"
                print(f"- {name}: `{rid}` expected {verdict}, reported {sev}: {reason}")
            else:
                print(f"- {name}: `{rid}` {'missed' if rid in expected else 'false positive'}")


if __name__ == "__main__":
    main()
