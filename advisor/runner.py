"""Run a bundled workload under `jax.profiler` and write a run folder the loader reads.

The run folder is the one `jax.profiler` creates (`<logdir>/plugins/profile/<run>/`); beside
its `.xplane.pb` we write `memory.prof` (the device memory profile) and `advisor_run.json`.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import re
import secrets
import statistics
import time
from pathlib import Path
from typing import Callable, Optional

from . import errors, hardware
from .cleanup import remove, sweep, track, untrack
from .locate import MEMORY_PROFILE, RUN_METADATA, TRACING_PREFIX
from .units import mib
from .workload_memory import (
    OutOfMemory,
    compile_abstract,
    device_capacity,
    is_out_of_memory,
    memory_analysis,
    required_bytes,
)

STEP_ANNOTATION = "train_step"
_TRACING_NAME = re.compile(r"\.advisor-tracing-(\d+)-")


def _versions() -> dict:
    from importlib import metadata
    out = {"python": platform.python_version()}
    for pkg in ("jax", "jaxlib", "flax", "optax", "xprof"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            pass
    try:    # the CUDA or ROCm the backend was built for, as jax reports it ("cuda 13000"); "cpu" on CPU
        import jax
        platform_version = jax.devices()[0].client.platform_version
        if isinstance(platform_version, str) and platform_version:
            out["platform"] = platform_version
    except Exception:  # noqa: BLE001 - a backend without the attribute: the version is left out
        pass
    return out


def recording() -> dict:
    """How a run was recorded, for advisor_run.json: the versions and XLA_FLAGS (the flags change the
    compiled program: command buffers, autotuning, fusion) as they were in this process."""
    return {"versions": _versions(), "xla_flags": os.environ.get("XLA_FLAGS", "")}


def profile_workload(name: str, preset: str, config: dict, logdir: Path,
                     progress: Callable[[str], None] = lambda msg: None,
                     memory_limit: Optional[int] = None) -> Path:
    """Pre-flight, compile, warm up, profile `config["train"]["steps"]` steps; return the run folder.
    Compiles through the compilation cache when it is on (`advisor.compile_cache`).

    Raises OutOfMemory when the step cannot fit (before running) or runs out at run time.
    """
    from advisor import compile_cache

    with compile_cache.active():
        return _profile(name, preset, config, logdir, progress, memory_limit)


def _profile(name: str, preset: str, config: dict, logdir: Path, progress: Callable[[str], None],
             memory_limit: Optional[int]) -> Path:
    import jax

    steps = config["train"]["steps"]
    if steps < 1:
        raise errors.AdvisorError("train.steps must be at least 1 (e.g. --steps 3)")
    device = jax.devices()[0]
    progress(f"building {name} ({preset}) on {device.platform} ({device.device_kind})")
    progress("compiling the train step")
    from advisor import compile_cache
    cached_before = compile_cache.counts()
    t0 = time.perf_counter()
    built, compiled, minibatch = compile_abstract(name, config)
    compile_s = time.perf_counter() - t0
    memory = memory_analysis(compiled)
    need = required_bytes(memory)
    capacity, source = device_capacity(memory_limit)
    if need is not None and need > capacity:
        raise OutOfMemory(need, capacity, source, at_run_time=False)
    if need is not None:
        progress(f"pre-flight: the step needs {mib(need)} of {mib(capacity)} ({source})")

    from advisor.workloads.train import zero_metrics
    private = None
    try:
        state = built.init_state()
        metrics = zero_metrics(built.loss_fn, state, minibatch)
        initial_loss = built.eval_loss(state.params)     # on one device, before the state is spread
        state, metrics = built.place(state, metrics)
        progress("warming up (1 step, not profiled)")
        state, metrics = compiled(state, metrics, built.batch)
        first_loss = float(metrics["loss"][0] / metrics["loss"][1])

        private = _private_logdir(logdir)
        progress(f"profiling {steps} steps")
        wall_ms = []
        jax.profiler.start_trace(str(private))
        try:
            for i in range(steps):
                t0 = time.perf_counter()
                with jax.profiler.StepTraceAnnotation(STEP_ANNOTATION, step_num=i):
                    state, metrics = compiled(state, metrics, built.batch)
                    jax.block_until_ready(metrics)
                wall_ms.append((time.perf_counter() - t0) * 1e3)
        finally:
            jax.profiler.stop_trace()
    except BaseException as err:  # noqa: BLE001 - only out-of-memory is turned into a finding
        if private is not None:       # Ctrl-C or SIGTERM included: no partial trace left in the logdir
            remove(private)
        if isinstance(err, Exception) and is_out_of_memory(err):
            raise OutOfMemory(need, capacity, source, at_run_time=True, detail=str(err).splitlines()[0]) from None
        raise
    run_dir = _claim_run_dir(private, logdir / "plugins" / "profile")
    from .heap_traces import restore
    try:
        for xplane in run_dir.glob("*.xplane.pb"):
            restore(xplane, compile_cache.directory(), _module_name(compiled))
        jax.profiler.save_device_memory_profile(str(run_dir / MEMORY_PROFILE))
        _write_metadata(run_dir, name, preset, config, device, built, compile_s, wall_ms, initial_loss, first_loss,
                        memory, need, capacity, source, _cache_use(compile_cache, cached_before))
    except BaseException:
        remove(run_dir)    # a run folder without its metadata is a partial one
        raise
    untrack(run_dir)
    return run_dir


def add_metadata(run_dir: Path, **fields) -> None:
    """Fields added to a recorded run's advisor_run.json (a sweep's varied keys), written whole or not
    at all (a temporary file renamed over it)."""
    path = run_dir / RUN_METADATA
    meta = json.loads(path.read_text())
    meta.update(fields)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(meta, indent=2) + "\n")
    os.replace(tmp, path)


def _write_metadata(run_dir, name, preset, config, device, built, compile_s, wall_ms, initial_loss, first_loss,
                    memory, need, capacity, source, cache_use) -> None:
    import jax

    from advisor.workloads import parallel as workload_parallel

    meta = {
        "workload": name,
        "preset": preset,
        "config": _jsonable(config),
        "backend": device.platform,
        "device_kind": device.device_kind,
        "device_count": jax.device_count(),
        "devices_used": workload_parallel.devices_needed(config),
        **recording(),
        "host": hardware.this_host(),     # the machine: advisor calibrate's figures apply to this run only there
        "num_params": built.num_params(),
        "compile_s": round(compile_s, 3),
        "compile_cache": cache_use,
        "step_wall_ms": [round(x, 3) for x in wall_ms],
        "step_wall_ms_median": round(statistics.median(wall_ms), 3),
        "initial_loss": initial_loss,
        "first_step_loss": first_loss,
        "memory_analysis": memory,
        "required_bytes": need,
        "capacity_bytes": capacity,
        "capacity_source": source,
        "created": datetime.datetime.now().isoformat(timespec="seconds"),
        **({"mesh": [list(a) for a in built.mesh_axes]} if built.mesh_axes else {}),
    }
    (run_dir / RUN_METADATA).write_text(json.dumps(meta, indent=2) + "\n")


def _module_name(compiled) -> str:
    try:
        return compiled.runtime_executable().hlo_modules()[0].name
    except Exception:  # noqa: BLE001 - no HLO module on this executable: nothing to keep
        return ""


def _cache_use(compile_cache, before: dict) -> Optional[dict]:
    """The compilation cache while the workload compiled and ran: programs loaded (hits) and compiled (misses),
    and the compile time the hits saved (JAX's figure, seconds); None when the cache was off.
    compile_s stays the time measured in this run: with hits, the time to load, not to compile."""
    folder = compile_cache.directory()
    if folder is None:
        return None
    now = compile_cache.counts()
    return {"directory": str(folder), "hits": now["hits"] - before["hits"], "misses": now["misses"] - before["misses"],
            "saved_s": round(now["saved_s"] - before["saved_s"], 3)}


def _private_logdir(logdir: Path) -> Path:
    """A logdir only this process writes into: two runs started in the same second (jax.profiler
    names run folders by the second) never share a run folder."""
    logdir.mkdir(parents=True, exist_ok=True)
    sweep(logdir, _TRACING_NAME)     # left by a run killed outright while it traced
    private = logdir / f"{TRACING_PREFIX}{os.getpid()}-{secrets.token_hex(4)}"
    private.mkdir(exist_ok=False)
    return track(private)      # removed if the process is stopped while it traces


def _claim_run_dir(private: Path, profile_root: Path) -> Path:
    """Move the run folder jax.profiler wrote under our private logdir to a unique name under
    `<logdir>/plugins/profile/` (the TensorBoard layout): timestamp, process id, random suffix."""
    created = [p for p in (private / "plugins" / "profile").glob("*") if p.is_dir()]
    if len(created) != 1:
        remove(private)
        raise errors.AdvisorError(f"jax.profiler wrote {len(created)} run folders under {private}, expected one")
    profile_root.mkdir(parents=True, exist_ok=True)
    run_dir = profile_root / f"{created[0].name}_{os.getpid()}_{secrets.token_hex(3)}"
    run_dir.mkdir(exist_ok=False)
    track(run_dir)     # partial until the caller has written what goes with the trace (it untracks it)
    for f in created[0].iterdir():
        f.rename(run_dir / f.name)
    remove(private)
    return run_dir


def _jsonable(config: dict) -> dict:
    from advisor.workloads.config import to_json
    return to_json(config)
