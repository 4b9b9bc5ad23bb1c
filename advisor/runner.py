"""Run a bundled workload under `jax.profiler` and write a run folder the loader reads.

The run folder is the one `jax.profiler` creates (`<logdir>/plugins/profile/<run>/`); beside
its `.xplane.pb` we write `memory.prof` (the device memory profile) and `advisor_run.json`.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import statistics
import time
from pathlib import Path
from typing import Callable

from . import errors

RUN_METADATA = "advisor_run.json"
MEMORY_PROFILE = "memory.prof"
STEP_ANNOTATION = "train_step"


def _versions() -> dict:
    from importlib import metadata
    out = {"python": platform.python_version()}
    for pkg in ("jax", "jaxlib", "flax", "optax", "xprof"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            pass
    return out


def _memory_analysis(compiled) -> dict:
    try:
        ma = compiled.memory_analysis()
    except Exception:  # noqa: BLE001 - not every backend implements it
        return {}
    if ma is None:
        return {}
    keys = ("argument_size_in_bytes", "output_size_in_bytes", "alias_size_in_bytes",
            "temp_size_in_bytes", "generated_code_size_in_bytes", "peak_memory_in_bytes")
    return {k: int(getattr(ma, k)) for k in keys if hasattr(ma, k)}


def profile_workload(name: str, preset: str, config: dict, logdir: Path,
                     progress: Callable[[str], None] = lambda msg: None) -> Path:
    """Compile, warm up, profile `config["train"]["steps"]` steps; return the run folder."""
    import jax

    from advisor import workloads

    built = workloads.get(name).build(config)
    steps = config["train"]["steps"]
    if steps < 1:
        raise errors.AdvisorError("train.steps must be at least 1 (e.g. --steps 3)")
    device = jax.devices()[0]
    progress(f"building {name} ({preset}) on {device.platform} ({device.device_kind})")
    state = built.init_state()
    from advisor.workloads.train import zero_metrics
    minibatch = jax.tree_util.tree_map(
        lambda x: x[: x.shape[0] // config["optimizer"]["num_minibatches"]], built.batch)
    metrics = zero_metrics(built.loss_fn, state, minibatch)
    donate = ("state", "metrics") if built.donate else ()
    step = jax.jit(built.train_step, donate_argnames=donate)

    progress("compiling the train step")
    t0 = time.perf_counter()
    compiled = step.lower(state, metrics, built.batch).compile()
    compile_s = time.perf_counter() - t0
    memory = _memory_analysis(compiled)

    progress("warming up (1 step, not profiled)")
    state, metrics = compiled(state, metrics, built.batch)
    first_loss = float(metrics["loss"][0] / metrics["loss"][1])

    logdir.mkdir(parents=True, exist_ok=True)
    profile_root = logdir / "plugins" / "profile"
    before = set(profile_root.iterdir()) if profile_root.exists() else set()
    progress(f"profiling {steps} steps")
    wall_ms = []
    jax.profiler.start_trace(str(logdir))
    try:
        for i in range(steps):
            t0 = time.perf_counter()
            with jax.profiler.StepTraceAnnotation(STEP_ANNOTATION, step_num=i):
                state, metrics = compiled(state, metrics, built.batch)
                jax.block_until_ready(metrics)
            wall_ms.append((time.perf_counter() - t0) * 1e3)
    finally:
        jax.profiler.stop_trace()
    run_dir = _new_run_dir(profile_root, before)
    jax.profiler.save_device_memory_profile(str(run_dir / MEMORY_PROFILE))

    meta = {
        "workload": name,
        "preset": preset,
        "config": _jsonable(config),
        "backend": device.platform,
        "device_kind": device.device_kind,
        "device_count": jax.device_count(),
        "versions": _versions(),
        "num_params": built.num_params(),
        "compile_s": round(compile_s, 3),
        "step_wall_ms": [round(x, 3) for x in wall_ms],
        "step_wall_ms_median": round(statistics.median(wall_ms), 3),
        "first_step_loss": first_loss,
        "memory_analysis": memory,
        "created": datetime.datetime.now().isoformat(timespec="seconds"),
    }
    (run_dir / RUN_METADATA).write_text(json.dumps(meta, indent=2) + "\n")
    return run_dir


def _new_run_dir(profile_root: Path, before: set) -> Path:
    created = sorted(set(profile_root.iterdir()) - before, key=os.path.getmtime)
    if not created:
        raise errors.AdvisorError(f"jax.profiler wrote no run folder under {profile_root}")
    return created[-1]


def _jsonable(config: dict) -> dict:
    from advisor.workloads.config import to_json
    return to_json(config)
