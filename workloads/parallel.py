"""The `parallel` config section the bundled workloads share: data parallelism over a 'data'
mesh axis, optionally with the parameters and optimizer state sharded over it (FSDP, as the
tutorial's Part 2.2 does), built with `jax.sharding` and left to XLA's SPMD partitioner.
"""

from __future__ import annotations

import math
import os

from . import config as cfg

SCHEMA = {
    "data": cfg.Field(1, cfg.parse_int, "devices on the data axis: the batch is split over them (on CPU, "
                                        "run-workload creates that many simulated devices)"),
    "fsdp": cfg.Field(False, cfg.parse_bool, "shard parameters and optimizer state over the data axis (FSDP)"),
    "fsdp_min_size": cfg.Field(2 ** 14, cfg.parse_int, "smallest leaf (elements) FSDP shards; smaller ones "
                                                       "stay replicated"),
}
# The Transformer's pipeline (workloads/pipeline.py): keys under parallel, spelled parallel.pipeline.*
PIPELINE_SCHEMA = {
    "pipeline.stages": cfg.Field(1, cfg.parse_int, "pipeline stages on a 'pipe' mesh axis (each holds num_layers / "
                                                   "stages blocks); 1: no pipeline"),
    "pipeline.microbatches": cfg.Field(1, cfg.parse_int, "microbatches the pipeline runs per step (M): the bubble "
                                                         "is (S - 1) / (L*M + S - 1)"),
    "pipeline.loops": cfg.Field(1, cfg.parse_int, "layers per stage visited round-robin (a looping pipeline, L); "
                                                  "more than 1 needs microbatches == stages"),
}
CPU_DEVICES_FLAG = "--xla_force_host_platform_device_count"


def devices_needed(config: dict) -> int:
    p = config.get("parallel", {})
    return max(1, p.get("data", 1)) * max(1, p.get("pipeline.stages", 1))


def validate(config: dict) -> None:
    n = max(1, config.get("parallel", {}).get("data", 1))
    batch, minibatches = config["data"]["batch_size"], config["optimizer"]["num_minibatches"]
    if n > 1 and (batch // max(minibatches, 1)) % n:
        raise cfg.ConfigError(f"parallel.data={n} must divide the minibatch (data.batch_size {batch} / "
                              f"optimizer.num_minibatches {minibatches})")
    validate_pipeline(config)


def validate_pipeline(config: dict) -> None:
    p = config.get("parallel", {})
    stages, micro, loops = p.get("pipeline.stages", 1), p.get("pipeline.microbatches", 1), p.get("pipeline.loops", 1)
    if stages < 1 or micro < 1 or loops < 1:
        raise cfg.ConfigError("parallel.pipeline.stages, .microbatches and .loops must be at least 1")
    if stages == 1:
        return
    m, o = config.get("model", {}), config["optimizer"]
    local = config["data"]["batch_size"] // max(1, p.get("data", 1))
    if m.get("num_layers", 0) % (stages * loops):
        raise cfg.ConfigError(f"model.num_layers ({m.get('num_layers')}) must be a multiple of "
                              f"parallel.pipeline.stages x loops ({stages} x {loops})")
    if local % micro:
        raise cfg.ConfigError(f"parallel.pipeline.microbatches={micro} must divide the batch on each data device "
                              f"({local})")
    if loops > 1 and micro != stages:
        raise cfg.ConfigError(f"a looping pipeline (parallel.pipeline.loops={loops}) needs microbatches == stages")
    if o["num_minibatches"] != 1 or not m.get("scan_layers", True) or p.get("fsdp"):
        raise cfg.ConfigError("the pipeline needs optimizer.num_minibatches=1, model.scan_layers=true and "
                              "parallel.fsdp=false")


def pipeline_config(config: dict, microbatches: int) -> dict:
    """The change to `microbatches` pipeline microbatches, where they divide the batch on each data device."""
    p = config.get("parallel", {})
    if p.get("pipeline.stages", 1) <= 1 or p.get("pipeline.microbatches", 1) == microbatches:
        return {}
    change = {"parallel.pipeline.microbatches": microbatches}
    trial = {**config, "parallel": {**p, "pipeline.microbatches": microbatches}}
    try:
        validate_pipeline(trial)
    except cfg.ConfigError:
        return {}
    return change


def fsdp_config(config: dict) -> dict:
    """The change that shards the state: `parallel.fsdp=true` where the batch is split and it is not yet."""
    p = config.get("parallel", {})
    if p.get("pipeline.stages", 1) > 1:
        return {}       # the pipeline keeps its state replicated over data (no FSDP there yet)
    return {"parallel.fsdp": True} if p.get("data", 1) > 1 and not p.get("fsdp") else {}


def ensure_cpu_devices(n: int) -> bool:
    """Ask for `n` simulated CPU devices before JAX starts its CPU backend; False once it has started."""
    if n <= 1:
        return True
    import sys
    if "jax" in sys.modules:
        try:
            from jax._src import xla_bridge
            if getattr(xla_bridge, "_backends", None):
                return False
        except ImportError:
            return False
    flags = [f for f in os.environ.get("XLA_FLAGS", "").split() if not f.startswith(CPU_DEVICES_FLAG)]
    os.environ["XLA_FLAGS"] = " ".join([*flags, f"{CPU_DEVICES_FLAG}={n}"])
    return True


def _fsdp_spec(shape, n: int, min_size: int):
    from jax.sharding import PartitionSpec as P
    if not shape or math.prod(shape) < min_size:
        return P()
    dims = sorted(range(len(shape)), key=lambda i: -shape[i])
    split = next((i for i in dims if shape[i] % n == 0), None)
    if split is None:
        return P()
    return P(*[("data" if i == split else None) for i in range(len(shape))])


def shardings(config: dict, state_shape, metrics_shape, batch):
    """(mesh, state, metrics, batch) shardings for `config`, or None for one device."""
    n = devices_needed(config)
    if n <= 1:
        return None
    import jax
    import numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

    if jax.device_count() < n:
        from advisor.errors import AdvisorError
        raise AdvisorError(f"parallel.data={n} needs {n} devices; JAX has {jax.device_count()}. On CPU, start "
                           f"with XLA_FLAGS={CPU_DEVICES_FLAG}={n} (advisor run-workload sets it itself when "
                           "JAX has not started yet)")
    mesh = Mesh(np.array(jax.devices()[:n]), ("data",))
    p = config["parallel"]
    replicated = NamedSharding(mesh, P())

    def state_leaf(x):
        if p["fsdp"]:
            return NamedSharding(mesh, _fsdp_spec(tuple(getattr(x, "shape", ())), n, p["fsdp_min_size"]))
        return replicated

    state = jax.tree_util.tree_map(state_leaf, state_shape)
    metrics = jax.tree_util.tree_map(lambda _: replicated, metrics_shape)
    data = jax.tree_util.tree_map(lambda _: NamedSharding(mesh, P("data")), batch)
    return mesh, state, metrics, data
