"""The GPU check: programs whose work is known on paper and the tutorial's Transformer rows, each
timed without the profiler, profiled, and analyzed by advisor; one table of advisor's figures
beside the truth, and of the measured gains beside advisor's advice.

On a CUDA machine (Python 3.12 with jax 0.11.2 for CUDA 13, flax, optax and tensorboard; no
xprof), from the repository root, with advisor's wheel and the xprof 2.24.2 and gviz-api wheels
in .whl/ (made where the package index is reachable: `pip wheel --no-deps -w .whl .` and
`pip download --no-deps --only-binary=:all: --python-version 3.12 -d .whl xprof==2.24.2 gviz-api`):

    pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
    PYTHONPATH=/tmp/site python benchmarks/gpu_check.py --out /tmp/gpu_check

It finishes within 8 minutes on one H100: each part (programs, Transformer rows, --verify) has a
time budget, and what would not fit in it is skipped with a line saying so. On CPU, the same
pipeline at small sizes (GEMMs of 256, 4 MiB elementwise, XLA's attention, the tiny Transformer):

    python benchmarks/gpu_check.py --out /tmp/gpu_check_tiny --preset tiny

Everything is written under --out (a new or empty folder): a TensorBoard logdir per program
(<key>/) and per Transformer row (rows/<key>/), --verify's re-runs (verify/), advisor's JSON for
each (advisor/<key>.json), every figure (gpu_check.json) and the table (gpu_check.md, also
printed). JAX's compilation cache and advisor's user cache live in --out/cache while it runs
(XDG_CACHE_HOME, ADVISOR_CACHE_DIR), removed at the end. Paper counts: gpu_check_programs.py.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Optional

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gpu_check_programs as progs  # noqa: E402
from gpu_check_table import markdown  # noqa: E402

PRESETS = {   # steps timed without the profiler, steps profiled; each part's budget in seconds
    "full": {"time_steps": 20, "trace_steps": 5, "row_time_steps": 10,
             "budget_s": {"programs": 150, "rows": 220, "verify": 70}},
    "tiny": {"time_steps": 10, "trace_steps": 3, "row_time_steps": 5,
             "budget_s": {"programs": 120, "rows": 420, "verify": 240}},
}
STEP_NAME = "train"       # StepTraceAnnotation's name, as in ../shared/h100-traces
WORKLOAD = "transformer"


class Clock:
    def __init__(self, budget_s: dict[str, float], started: Optional[float] = None):
        self.t0 = time.perf_counter() if started is None else started
        self.deadline = {"programs": budget_s["programs"], "rows": sum(budget_s.values()) - budget_s["verify"],
                         "verify": sum(budget_s.values())}

    def elapsed(self) -> float:
        return time.perf_counter() - self.t0

    def log(self, msg: str) -> None:
        print(f"[{self.elapsed():6.1f} s] {msg}", file=sys.stderr, flush=True)

    def affords(self, part: str, estimate_s: float) -> bool:
        return self.elapsed() + estimate_s <= self.deadline[part]


@contextlib.contextmanager
def caches_under(out: Path):
    """JAX's compilation cache (advisor's, via XDG_CACHE_HOME) and advisor's user cache inside --out,
    never the user's; the environment put back and the cache removed after."""
    from advisor import compile_cache

    keys = ("XDG_CACHE_HOME", "ADVISOR_CACHE_DIR", compile_cache.ENV)
    before = {k: os.environ.get(k) for k in keys}
    os.environ["XDG_CACHE_HOME"] = str(out / "cache")
    os.environ["ADVISOR_CACHE_DIR"] = str(out / "cache" / "advisor")
    compile_cache.choose(True)
    try:
        yield
    finally:
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        shutil.rmtree(out / "cache", ignore_errors=True)


def analyze(logdir: Path, json_path: Path) -> dict:
    """`advisor analyze LOGDIR --format json`, in this process; the document kept, its figures returned."""
    import advisor

    doc = advisor.analyze(str(logdir)).to_dict()
    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(doc, indent=1) + "\n")
    return summarize(doc)


def summarize(doc: dict) -> dict:
    if not doc["runs"]:
        return {"error": "; ".join(f["reason"] for f in doc["failed"]) or "no run found"}
    run = doc["runs"][0]
    s = run["summary"]
    eff = s.get("efficiency") or {}
    keep = ("flops_per_step", "matmul_flops_per_step", "model_flops_per_step", "bytes_per_step", "mfu", "hfu",
            "bound", "verdict", "peak", "matmul_dtype", "unknown_flops_time_share")
    return {"path": run["path"], "step_time_ms": s.get("step_time_ms"), "steps": s.get("steps"),
            "peak_memory_bytes": s.get("peak_memory_bytes"), **{k: eff.get(k) for k in keep},
            "notes": [f"warning: {w}" for w in run.get("warnings") or []] + list(eff.get("notes") or [])
            + [str(n) for n in run.get("notes") or []],
            "findings": [{"rule": f["rule"], "severity": f["severity"], "title": f["title"],
                          "expected": f["recommendation"]["expected"].get("text"),
                          "checked": f["recommendation"].get("checked"), "check": f["recommendation"].get("check"),
                          **({"verified": f["verified"]} if "verified" in f else {})} for f in run["findings"]]}


def timed_steps(step: Callable[[], object], n: int) -> list[float]:
    """Wall time of each of n steps (ms), each blocked on."""
    import jax

    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        jax.block_until_ready(step())
        out.append((time.perf_counter() - t0) * 1e3)
    return out


def run_program(p: progs.Program, out: Path, cfg: dict, clock: Clock) -> dict:
    import jax

    fn, args = p.build()
    t0 = time.perf_counter()
    jax.block_until_ready(fn(*args))          # compile once
    first_s = time.perf_counter() - t0
    timed_steps(lambda: fn(*args), 2)         # warm
    ms = timed_steps(lambda: fn(*args), cfg["time_steps"])
    clock.log(f"{p.key}: compiled and first step {first_s:.2f} s; untraced median {statistics.median(ms):.3f} ms "
              f"over {len(ms)} steps")
    with jax.profiler.trace(str(out / p.key)):
        for i in range(cfg["trace_steps"]):
            with jax.profiler.StepTraceAnnotation(STEP_NAME, step_num=i):
                jax.block_until_ready(fn(*args))
    fn = args = None          # not del: the lambdas above close over them
    jax.clear_caches()        # the next traces carry only their own programs
    clock.log(f"{p.key}: profiled {cfg['trace_steps']} steps; analyzing")
    return {"label": p.label, "kind": "program", "dtype": p.dtype,
            "paper": {"flops": p.flops, "bytes": p.bytes, "bound": p.bound, "expect_ratio": p.expect_ratio,
                      "note": p.note},
            "untraced_ms": statistics.median(ms), "untraced_steps_ms": [round(x, 4) for x in ms],
            "compile_and_first_s": round(first_s, 3),
            "advisor": analyze(out / p.key, out / "advisor" / f"{p.key}.json")}


def time_workload(config: dict, steps: int) -> tuple[float, bool]:
    """(median step ms without the profiler, whether the traced run's program was loaded from the
    cache rather than compiled again). After the traced run: a compile before it would leave the
    traced program a cached one, without the heap simulation its trace needs (advisor/heap_traces.py)."""
    import jax

    from advisor import compile_cache
    from advisor.workload_memory import compile_abstract
    from advisor.workloads.train import zero_metrics

    hits = compile_cache.counts()["hits"]
    with compile_cache.active(write=False):      # and the very binary traced: a new compile may autotune others
        built, compiled, minibatch = compile_abstract(WORKLOAD, config)
    loaded = compile_cache.counts()["hits"] > hits
    state = built.init_state()
    box = list(built.place(state, zero_metrics(built.loss_fn, state, minibatch)))

    def step():
        box[:] = compiled(*box, built.batch)     # the state is donated: carried from step to step
        return box
    timed_steps(step, 1)
    ms = statistics.median(timed_steps(step, steps))
    box = state = compiled = None     # not del: step() closes over them
    jax.clear_caches()
    return ms, loaded


def run_row(key: str, label: str, overrides: list[str], preset: str, out: Path, cfg: dict, clock: Clock) -> dict:
    from advisor import locate, runner, workloads

    config = workloads.resolve(WORKLOAD, preset, overrides)
    logdir = out / "rows" / key
    # what `advisor run-workload` and `advisor sweep` run: pre-flight, compile, warm-up, profiled steps
    run_dir = runner.profile_workload(WORKLOAD, preset, config, logdir, lambda m: clock.log(f"{key}: {m}"))
    meta = json.loads((run_dir / locate.RUN_METADATA).read_text())
    ms, loaded = time_workload(config, cfg["row_time_steps"])
    clock.log(f"{key}: untraced median {ms:.2f} ms over {cfg['row_time_steps']} steps "
              f"({'program loaded from the cache' if loaded else 'program compiled again'}); analyzing")
    model, hardware = progs.transformer_paper(config)
    return {"label": label, "kind": "row", "overrides": overrides, "run_dir": str(run_dir),
            "command": f"advisor run-workload {WORKLOAD} --preset {preset} "
                       + " ".join(f"--set {o}" for o in overrides),
            "paper": {"model_flops": model, "flops": hardware, "bytes": None, "bound": None, "expect_ratio": 1.0,
                      "note": ""},
            "untraced_ms": ms, "untraced_program_loaded": loaded, "profiled_wall_ms": meta["step_wall_ms"],
            "advisor": analyze(logdir, out / "advisor" / f"{key}.json")}


def run_verify(row: dict, preset: str, out: Path, clock: Clock, row_s: float) -> Optional[list]:
    """`--verify` on the row's own trace: each fix applied alone, re-run and measured (as
    `advisor run-workload ... --verify --no-compile-check`). None when it would not fit the budget."""
    from advisor.api import Report
    from advisor.engine import analyze_path
    from advisor.verification import verify_workload

    (analysis,) = analyze_path(Path(row["run_dir"]))
    fixes = sum(1 for f in analysis.findings if f.recommendation.config or f.recommendation.refuted)
    if not clock.affords("verify", fixes * row_s):
        return None
    clock.log(f"verify: {fixes} fixes of {row['label']}, about {fixes * row_s:.0f} s")
    verify_workload(WORKLOAD, preset, row["overrides"], analysis, out / "verify", lambda m: clock.log(f"verify: {m}"))
    doc = Report([analysis], [], row["run_dir"], "run-workload").to_dict()
    (out / "advisor" / "verify.json").write_text(json.dumps(doc, indent=1) + "\n")
    return summarize(doc)["findings"]


def environment() -> dict:
    import jax

    import advisor

    device = jax.devices()[0]
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                cwd=Path(__file__).resolve().parent, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        commit = ""
    return {"backend": device.platform, "device_kind": device.device_kind, "devices": jax.device_count(),
            "jax": jax.__version__, "jaxlib": _version("jaxlib"),
            "advisor": advisor.__version__, "advisor_module": str(Path(advisor.__file__).parent),
            "commit": commit or None, "python": sys.version.split()[0], "xla_flags": os.environ.get("XLA_FLAGS", ""),
            "date": datetime.datetime.now().isoformat(timespec="seconds")}


def _version(pkg: str) -> Optional[str]:
    from importlib import metadata
    try:
        return metadata.version(pkg)
    except metadata.PackageNotFoundError:
        return None


def run(out: Path, preset: str, only: Optional[set] = None, results: Optional[dict] = None,
        started: Optional[float] = None) -> dict:
    """Record, time and analyze every program and row of the preset (those in `only`, if given);
    `results` is filled as the check goes, so an interrupted check still leaves what it measured.
    `started`: the perf_counter the budgets count from (default: now)."""
    import jax

    cfg = PRESETS[preset]
    clock = Clock(cfg["budget_s"], started)
    results = results if results is not None else {}
    results.update({"preset": preset, "environment": environment(), "programs": {}, "rows": {}, "verify": None,
                    "skipped": [], "parts_s": {}, "complete": False})

    def skip(key: str, why: str) -> None:
        clock.log(f"skipped: {key}: {why}")
        results["skipped"].append({"key": key, "reason": why})

    def wanted(key: str) -> bool:
        return only is None or key in only

    gpu = jax.default_backend() == "gpu"
    with caches_under(out):
        spent: list[float] = []
        for p in progs.programs(preset):
            if not wanted(p.key):
                continue
            if p.needs_gpu and not gpu:
                skip(p.key, f"needs a CUDA GPU (cuDNN attention); JAX's backend here is {jax.default_backend()}")
            elif not clock.affords("programs", statistics.mean(spent) if spent else 0):
                skip(p.key, f"the programs' budget ({cfg['budget_s']['programs']} s) is spent")
            else:
                t0 = time.perf_counter()
                try:
                    results["programs"][p.key] = run_program(p, out, cfg, clock)
                except Exception as err:  # noqa: BLE001 - one program that cannot run here is a line, not the end
                    skip(p.key, failed(err))
                spent.append(time.perf_counter() - t0)
        if spent:
            results["parts_s"]["programs"] = round(sum(spent), 1)

        workload_preset, spent = progs.SIZES[preset]["workload_preset"], []
        for key, label, overrides in progs.rows(preset):
            if not wanted(key):
                continue
            if not clock.affords("rows", statistics.mean(spent) if spent else 0):
                skip(key, f"the Transformer rows' budget (up to {clock.deadline['rows']:.0f} s elapsed) is spent")
                continue
            t0 = time.perf_counter()
            try:
                results["rows"][key] = run_row(key, label, overrides, workload_preset, out, cfg, clock)
            except Exception as err:  # noqa: BLE001 - an out-of-memory row, say, is a line
                skip(key, failed(err))
            spent.append(time.perf_counter() - t0)
        if spent:
            results["parts_s"]["rows"] = round(sum(spent), 1)

        row = results["rows"].get(progs.VERIFY_ROW)
        if wanted("verify") and row is not None:
            t0 = time.perf_counter()
            try:
                verified = run_verify(row, workload_preset, out, clock, statistics.mean(spent))
                if verified is None:
                    skip("verify", f"its re-runs would not fit the budget (up to {clock.deadline['verify']:.0f} s "
                                   "elapsed)")
            except Exception as err:  # noqa: BLE001 - the table of what was measured still comes out
                verified = None
                skip("verify", failed(err))
            results["verify"] = {"row": progs.VERIFY_ROW, "findings": verified}
            results["parts_s"]["verify"] = round(time.perf_counter() - t0, 1)
        elif wanted("verify"):
            skip("verify", f"it re-runs row {progs.VERIFY_ROW}'s fixes, and that row was not recorded")
    results["elapsed_s"] = round(clock.elapsed(), 1)
    results["complete"] = True
    clock.log(f"done in {results['elapsed_s']:.0f} s")
    return results


def main(argv: Optional[list[str]] = None) -> int:
    started = time.perf_counter()
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True, help="a new or empty folder: everything goes there")
    ap.add_argument("--preset", choices=sorted(PRESETS), default="full",
                    help="full: the sizes of the issue, on a CUDA GPU; tiny: small sizes, on CPU")
    ap.add_argument("--only", metavar="KEY,...", help="run only these programs and rows (and 'verify'): "
                    + ", ".join(p.key for p in progs.programs("tiny")) + ", "
                    + ", ".join(r[0] for r in progs.rows("tiny")) + ", verify")
    args = ap.parse_args(argv)
    only = None if args.only is None else {k.strip() for k in args.only.split(",") if k.strip()}
    known = {p.key for p in progs.programs("tiny")} | {r[0] for r in progs.rows("tiny")} | {"verify"}
    if only is not None and only - known:
        return _fail(f"--only: unknown keys {', '.join(sorted(only - known))} (known: {', '.join(sorted(known))})")
    if args.out.exists() and (not args.out.is_dir() or any(args.out.iterdir())):
        return _fail(f"--out {args.out} exists and is not an empty folder: give a new one (nothing was written)")
    import jax
    if args.preset == "full" and jax.default_backend() != "gpu":
        return _fail(f"--preset full needs a CUDA GPU; JAX's backend here is {jax.default_backend()}: "
                     "--preset tiny runs the same check on CPU")
    args.out.mkdir(parents=True, exist_ok=True)
    results: dict = {}
    try:
        run(args.out, args.preset, only, results, started)
    finally:
        if results:
            (args.out / "gpu_check.json").write_text(json.dumps(results, indent=1) + "\n")
            table = markdown(results)
            (args.out / "gpu_check.md").write_text(table)
            print(table)
            print(f"written under {args.out}: gpu_check.md, gpu_check.json, advisor/, the logdirs",
                  file=sys.stderr)
    return 0


def failed(err: Exception) -> str:
    text = str(err).strip()
    return f"failed: {type(err).__name__}" + (f": {text.splitlines()[0]}" if text else "")


def _fail(message: str) -> int:
    print(f"gpu_check: {message}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
