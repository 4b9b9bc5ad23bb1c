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
# The Transformer's pipeline (workloads/pipeline_parallel.py): keys under parallel, spelled parallel.pipeline.*
PIPELINE_SCHEMA = {
    "pipeline.stages": cfg.Field(1, cfg.parse_int, "pipeline stages on a 'pipe' mesh axis (each holds num_layers / "
                                                   "stages blocks); 1: no pipeline"),
    "pipeline.microbatches": cfg.Field(1, cfg.parse_int, "microbatches the pipeline runs per step (M): the bubble "
                                                         "is (S - 1) / (L*M + S - 1)"),
    "pipeline.loops": cfg.Field(1, cfg.parse_int, "layers per stage visited round-robin (a looping pipeline, L); "
                                                  "more than 1 needs microbatches == stages"),
}
# The Transformer's tensor parallelism: Megatron-style splits of the attention heads and MLP hidden
# units over a 'tensor' axis; sync: specs, collectives left to XLA's SPMD partitioner (by hand with
# psums inside the pipeline); async: Part 4.2's collective-permute rings (workloads/tensor.py)
TENSOR_MODES = ("sync", "async")
TENSOR_SCHEMA = {
    "tensor": cfg.Field(1, cfg.parse_int, "devices on a 'tensor' mesh axis: attention heads and MLP hidden units "
                                          "split over them (Megatron-style)"),
    "tensor.mode": cfg.Field("sync", cfg.parse_choice(TENSOR_MODES),
                             "sync: whole activations, the blocks' second matmuls summed over the axis (all-reduce); "
                             "async: activations split over it, gathered and scattered in collective-permute rings "
                             "beside the per-shard matmuls (Part 4.2; no dropout in the blocks)", TENSOR_MODES),
}
# leaf path suffix -> the dimension (from the end) split over 'tensor'
TENSOR_DIMS = {("attn", "qkv", "kernel"): -2, ("attn", "qkv", "bias"): -2, ("attn", "output_layer", "kernel"): -3,
               ("mlp", "input_layer", "kernel"): -1, ("mlp", "input_layer", "bias"): -1,
               ("mlp", "output_layer", "kernel"): -2}
CPU_DEVICES_FLAG = "--xla_force_host_platform_device_count"


def devices_needed(config: dict) -> int:
    p = config.get("parallel", {})
    return max(1, p.get("data", 1)) * max(1, p.get("pipeline.stages", 1)) * max(1, p.get("tensor", 1))


def validate(config: dict) -> None:
    n = max(1, config.get("parallel", {}).get("data", 1))
    batch, minibatches = config["data"]["batch_size"], config["optimizer"]["num_minibatches"]
    if n > 1 and (batch // max(minibatches, 1)) % n:
        raise cfg.ConfigError(f"parallel.data={n} must divide the minibatch (data.batch_size {batch} / "
                              f"optimizer.num_minibatches {minibatches})")
    validate_pipeline(config)
    validate_tensor(config)


def validate_tensor(config: dict) -> None:
    p, m = config.get("parallel", {}), config.get("model", {})
    t = p.get("tensor", 1)
    if t < 1:
        raise cfg.ConfigError("parallel.tensor must be at least 1")
    if t == 1:
        return
    if p.get("tensor.mode", "sync") == "async" and p.get("fsdp"):
        raise cfg.ConfigError("parallel.tensor.mode=async needs parallel.fsdp=false (its shard_map step keeps the "
                              "state whole over the data axis)")
    heads = m.get("hidden_size", 0) // max(1, m.get("head_dim", 1))
    if heads % t or (m.get("hidden_size", 0) * m.get("mlp_expansion", 1)) % t:
        raise cfg.ConfigError(f"parallel.tensor={t} must divide the attention heads ({heads}) and the MLP's hidden "
                              "units")


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
    if p.get("pipeline.stages", 1) > 1 or (p.get("tensor", 1) > 1 and p.get("tensor.mode") == "async"):
        return {}       # the shard_map steps keep their state replicated over data (no FSDP there yet)
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
    os.environ["XLA_FLAGS"] = xla_flags_with_cpu_devices(n)
    return True


def xla_flags_with_cpu_devices(n: int) -> str:
    """XLA_FLAGS asking for `n` simulated CPU devices, the environment's other XLA flags kept."""
    flags = [f for f in os.environ.get("XLA_FLAGS", "").split() if not f.startswith(CPU_DEVICES_FLAG)]
    return " ".join([*flags, f"{CPU_DEVICES_FLAG}={n}"])


def _fsdp_spec(shape, n: int, min_size: int):
    from jax.sharding import PartitionSpec as P
    if not shape or math.prod(shape) < min_size:
        return P()
    dims = sorted(range(len(shape)), key=lambda i: -shape[i])
    split = next((i for i in dims if shape[i] % n == 0), None)
    if split is None:
        return P()
    return P(*[("data" if i == split else None) for i in range(len(shape))])


def tensor_dim(path, rank: int):
    """The dimension of a parameter (or its optimizer moment) split over 'tensor', from its path."""
    names = tuple(str(getattr(k, "key", getattr(k, "name", ""))) for k in path)
    for suffix, dim in TENSOR_DIMS.items():
        if names[-len(suffix):] == suffix and rank >= -dim:
            return rank + dim
    return None


def shardings(config: dict, state_shape, metrics_shape, batch):
    """(mesh, state, metrics, batch) shardings for `config`, or None for one device."""
    n = devices_needed(config)
    if n <= 1:
        return None
    import jax
    import numpy as np
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    if jax.device_count() < n:
        from advisor.errors import AdvisorError
        raise AdvisorError(f"parallel settings need {n} devices; JAX has {jax.device_count()}. On CPU, start "
                           f"with XLA_FLAGS={CPU_DEVICES_FLAG}={n} (advisor run-workload sets it itself when "
                           "JAX has not started yet)")
    p = config["parallel"]
    data, tensor = max(1, p.get("data", 1)), max(1, p.get("tensor", 1))
    if tensor > 1:
        mesh = Mesh(np.array(jax.devices()[:n]).reshape(data, tensor), ("data", "tensor"))
    else:
        mesh = Mesh(np.array(jax.devices()[:n]), ("data",))
    replicated = NamedSharding(mesh, P())

    def state_leaf(path, x):
        shape = tuple(getattr(x, "shape", ()))
        spec = [None] * len(shape)
        split = tensor_dim(path, len(shape)) if tensor > 1 else None
        if split is not None:
            spec[split] = "tensor"
        if p["fsdp"] and data > 1:
            free = tuple(d if spec[i] is None else 1 for i, d in enumerate(shape))
            fsdp = _fsdp_spec(free, data, p["fsdp_min_size"]) if math.prod(shape) >= p["fsdp_min_size"] else P()
            for i, name in enumerate(fsdp):
                if name is not None:
                    spec[i] = name
        return NamedSharding(mesh, P(*spec)) if any(spec) else replicated

    state = jax.tree_util.tree_map_with_path(state_leaf, state_shape)
    metrics = jax.tree_util.tree_map(lambda _: replicated, metrics_shape)
    data = jax.tree_util.tree_map(lambda _: NamedSharding(mesh, P("data")), batch)
    return mesh, state, metrics, data
