"""Pipeline parallelism for the bundled Transformer (the tutorial's Parts 3.1 and 3.2): the scanned
blocks' parameters, stacked [num_layers, ...], are split over a `pipe` mesh axis (each stage holds
num_layers / S consecutive blocks), the batch is cut into microbatches, and a `fori_loop` of
L*M + S - 1 iterations runs them with a `ppermute` ring between stages, under `shard_map` over a
(data, pipe) mesh. Embedding, final norm and head are replicated; their gradients are summed over
`pipe`, every gradient is averaged over `data`. The blocks run without dropout here, so a change of
microbatches computes the same function (what `--verify` checks).
"""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import Mesh


def settings(config: dict) -> tuple[int, int, int]:
    p = config.get("parallel", {})
    return p.get("pipeline.stages", 1), p.get("pipeline.microbatches", 1), p.get("pipeline.loops", 1)


def mesh_for(config: dict) -> Mesh:
    if config["parallel"].get("tensor", 1) > 1:
        from . import tensor
        return tensor.mesh_for(config, ("data", "pipe", tensor.AXIS))
    stages, _, _ = settings(config)
    data = config["parallel"]["data"]
    if jax.device_count() < data * stages:
        from advisor.errors import AdvisorError
        raise AdvisorError(f"parallel.data={data} x parallel.pipeline.stages={stages} needs {data * stages} devices; "
                           f"JAX has {jax.device_count()}. On CPU, start with "
                           f"XLA_FLAGS=--xla_force_host_platform_device_count={data * stages} (advisor run-workload "
                           "sets it itself when JAX has not started yet)")
    return Mesh(np.array(jax.devices()[:data * stages]).reshape(data, stages), ("data", "pipe"))


def _in_blocks(path) -> bool:
    return any(getattr(k, "key", None) == "block" for k in path)


def state_specs(state, tensor_size: int = 1):
    """'pipe' on the first dimension of the blocks' stacked leaves (parameters and optimizer moments),
    'tensor' on the split dimension of the attention and MLP leaves (with parallel.tensor), else replicated."""
    from . import tensor
    return tensor.specs(state, tensor_size, leading=lambda path: ("pipe",) if _in_blocks(path) else ())


def make(config: dict, model_config, block_cls, optimizer, attention) -> tuple[Any, Any]:
    """(train_step, shardings): the step under shard_map, and the function giving the runner its
    (mesh, state, metrics, batch) shardings. With parallel.tensor = T > 1 the mesh is data x pipe x
    tensor (Part 5) and each stage's blocks are split over 'tensor' by hand (workloads/tensor.py)."""
    from . import tensor

    stages, micro, loops = settings(config)
    mesh = mesh_for(config)
    c = model_config
    ring = [(i, (i + 1) % stages) for i in range(stages)]
    size, mode = config["parallel"].get("tensor", 1), config["parallel"].get("tensor.mode", "sync")
    split_block = tensor.make_block(c, mode, size, attention) if size > 1 else None
    features_split = size > 1 and mode == "async"

    def stage(blocks, x, loop):
        per_loop = jax.tree_util.tree_leaves(blocks)[0].shape[0] // loops
        mine = jax.tree_util.tree_map(lambda a: jax.lax.dynamic_slice_in_dim(a, loop * per_loop, per_loop), blocks) \
            if loops > 1 else blocks
        mask = nn.make_causal_mask(jnp.ones(x.shape[:2]), dtype=jnp.bool_) if c.causal_mask else None
        block = block_cls(config=c, mask=mask, train=False)

        def one(h, p):
            if split_block is not None:
                return split_block(p, h, mask), None
            return block.apply({"params": p}, h), None
        x, _ = jax.lax.scan(one, x, mine)
        return x

    def pipeline(blocks, x):
        index = jax.lax.axis_index("pipe")
        xs = x.reshape(micro, -1, *x.shape[1:])

        def body(i, carry):
            state, out = carry
            k = i - index                                   # this stage's work item: loop k // M, microbatch k % M
            loop = jnp.clip(k // micro, 0, loops - 1)
            state = jnp.where((index == 0) & (k < micro), xs[i % micro], state)
            state = stage(blocks, state, loop)
            done = k % micro
            last = (index == stages - 1) & (k >= (loops - 1) * micro) & (k < loops * micro)
            out = out.at[done].set(jnp.where(last, state, out[done]))
            return jax.lax.ppermute(state, "pipe", ring), out

        init = (jnp.zeros_like(xs[0]), jnp.zeros_like(xs))
        _, out = jax.lax.fori_loop(0, loops * micro + stages - 1, body, init)
        return out.reshape(x.shape)

    def loss_fn(params, batch):
        tokens = batch.inputs
        x = tensor.embed(params, tokens, c)
        x = pipeline(params["block"], tensor.local_features(x, size) if features_split else x)
        logits = tensor.head(params, tensor.gather_features(x) if features_split else x, c)
        loss = optax.softmax_cross_entropy_with_integer_labels(logits, batch.labels)
        correct = jnp.equal(jnp.argmax(logits, axis=-1), batch.labels)
        last = jax.lax.axis_index("pipe") == stages - 1
        count = np.prod(batch.labels.shape)
        metrics = {"loss": (jnp.where(last, loss.sum(), 0.0), jnp.where(last, count, 0)),
                   "accuracy": (jnp.where(last, correct.sum(), 0), jnp.where(last, count, 0))}
        # with a tensor axis, each of its devices computes the whole loss and counts 1/T of it
        return jnp.where(last, loss.mean(), 0.0) / size, metrics

    def local_step(state, metrics, batch):
        (_, step_metrics), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.params, batch)
        # replicated parameters (embedding, norm, head) get their gradient on one stage: sum over pipe
        grads = jax.tree_util.tree_map_with_path(
            lambda path, g: g if _in_blocks(path) else jax.lax.psum(g, "pipe"), grads)
        if size > 1:
            grads = tensor.sum_replicated_grads(grads)
        grads = jax.lax.pmean(grads, "data")
        step_metrics = jax.lax.psum(jax.lax.psum(step_metrics, "pipe"), "data")
        new_state = state.apply_gradients(grads=grads)
        metrics = jax.tree_util.tree_map(jnp.add, metrics, step_metrics)
        return new_state, metrics

    return tensor.per_device_step(mesh, local_step, lambda tree: state_specs(tree, size))
