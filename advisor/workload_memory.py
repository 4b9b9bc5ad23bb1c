"""A bundled workload's memory, from XLA's compile of its step without running it: what the step
needs (arguments + outputs - aliased + temporaries), what the device holds, and the error a step
that does not fit raises. The recorder (advisor/runner.py), the memory plan of an out-of-memory run
and the compile-checked advice read it; nothing here records a trace.
"""

from __future__ import annotations

from typing import Optional


def memory_analysis(compiled) -> dict:
    try:
        ma = compiled.memory_analysis()
    except Exception:  # noqa: BLE001 - not every backend implements it
        return {}
    if ma is None:
        return {}
    keys = ("argument_size_in_bytes", "output_size_in_bytes", "alias_size_in_bytes",
            "temp_size_in_bytes", "generated_code_size_in_bytes", "peak_memory_in_bytes")
    return {k: int(getattr(ma, k)) for k in keys if hasattr(ma, k)}


class OutOfMemory(Exception):
    """The step does not fit: raised before running (pre-flight) or caught at run time."""

    def __init__(self, required: Optional[int], capacity: int, source: str, at_run_time: bool, detail: str = ""):
        super().__init__(detail or "out of memory")
        self.required, self.capacity, self.source = required, capacity, source
        self.at_run_time, self.detail = at_run_time, detail


def required_bytes(memory: dict) -> Optional[int]:
    """Device memory the compiled step needs: arguments + outputs - aliased + temporaries."""
    if not memory:
        return None
    return (memory.get("argument_size_in_bytes", 0) + memory.get("output_size_in_bytes", 0)
            - memory.get("alias_size_in_bytes", 0) + memory.get("temp_size_in_bytes", 0))


def device_capacity(memory_limit: Optional[int] = None) -> tuple[int, str]:
    """(bytes, where the number comes from): --memory-limit, the device's own limit, or free host memory."""
    import jax

    if memory_limit:
        return memory_limit, "--memory-limit"
    device = jax.devices()[0]
    stats = {}
    try:
        stats = device.memory_stats() or {}
    except Exception:  # noqa: BLE001 - not every backend reports memory stats
        pass
    if stats.get("bytes_limit"):
        return int(stats["bytes_limit"]), f"{device.device_kind} memory limit"
    import psutil
    return int(psutil.virtual_memory().available), "available host memory (CPU backend)"


def compile_abstract(name: str, config: dict):
    """Build the workload and compile its step from shapes alone: nothing is allocated."""
    import jax

    from advisor import workloads
    from advisor.workloads import parallel
    from advisor.workloads.train import zero_metrics

    built = workloads.get(name).build(config)
    state_shape = jax.eval_shape(built.init_state)
    minibatch = jax.tree_util.tree_map(
        lambda x: x[: x.shape[0] // config["optimizer"]["num_minibatches"]], built.batch)
    metrics_shape = jax.eval_shape(lambda s, b: zero_metrics(built.loss_fn, s, b), state_shape, minibatch)
    donate = ("state", "metrics") if built.donate else ()
    placed = (built.shardings(state_shape, metrics_shape, built.batch) if built.shardings is not None
              else parallel.shardings(config, state_shape, metrics_shape, built.batch))
    if placed is None:
        step = jax.jit(built.train_step, donate_argnames=donate)
    else:   # data parallel over the mesh: XLA partitions the step (all-reduce, or FSDP's gathers)
        mesh, state_sh, metrics_sh, batch_sh = placed
        built.mesh_axes = built.mesh_axes or [(str(k), int(v)) for k, v in mesh.shape.items()]
        step = jax.jit(built.train_step, donate_argnames=donate, in_shardings=(state_sh, metrics_sh, batch_sh),
                       out_shardings=(state_sh, metrics_sh))
        built.batch = jax.device_put(built.batch, batch_sh)
        built.place = lambda state, metrics: (jax.device_put(state, state_sh), jax.device_put(metrics, metrics_sh))
    compiled = step.lower(state_shape, metrics_shape, built.batch).compile()
    return built, compiled, minibatch


def estimate_bytes(name: str, config: dict) -> Optional[int]:
    """Memory the step of `config` would need, from compiling it (not running it)."""
    from advisor import compile_cache

    # kept apart from traced runs' programs (compile_cache's docstring): loaded here next time
    with compile_cache.active(folder=compile_cache.untraced_dir()):
        _, compiled, _ = compile_abstract(name, config)
    return required_bytes(memory_analysis(compiled))


def is_out_of_memory(err: Exception) -> bool:
    text = f"{type(err).__name__}: {err}"
    return "RESOURCE_EXHAUSTED" in text or "Out of memory" in text or "out of memory" in text
