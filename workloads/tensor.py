"""The Transformer's blocks split over a 'tensor' mesh axis by hand, under shard_map (the tutorial's
Parts 4.1 to 4.3): attention heads and MLP hidden units on each device, as the sync mode's specs
split them (parallel.TENSOR_DIMS).

- "sync" (inside the pipeline only; alone, the SPMD partitioner does it): the activations are whole on
  every device, and the second matmul of each block is summed over the axis with a psum.
- "async" (Part 4.2): the activations between the blocks hold 1/T of the features on each device. The
  first matmul of a block gathers the features in a collective-permute ring, one shard per step, and
  the second reduce-scatters its partial sums in another ring: each step's matmul can run while the
  next shard travels. The norms sum their statistics over the axis (two small psums).

Both compute the same function as the unsplit model, without dropout (the masks would differ).
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P

from .parallel import tensor_dim

AXIS = "tensor"
MODES = ("sync", "async")


def _ring(size: int):
    return [(i, (i + 1) % size) for i in range(size)]


def local_features(x, size: int):
    """This device's 1/size of the last dimension."""
    width = x.shape[-1] // size
    return jax.lax.dynamic_slice_in_dim(x, jax.lax.axis_index(AXIS) * width, width, axis=x.ndim - 1)


def gather_features(x):
    return jax.lax.all_gather(x, AXIS, axis=x.ndim - 1, tiled=True)


def gather_matmul(x, w, size: int):
    """x @ w for x holding this device's feature shard and w all rows: a ring over the shards."""
    index = jax.lax.axis_index(AXIS)
    rows = w.reshape(size, w.shape[0] // size, w.shape[1])
    acc = x @ rows[index]
    for k in range(1, size):
        x = jax.lax.ppermute(x, AXIS, _ring(size))
        acc = acc + x @ rows[(index - k) % size]
    return acc


def matmul_scatter(h, w, size: int):
    """This device's feature shard of the sum over the axis of h @ w: a ring of partial sums."""
    index = jax.lax.axis_index(AXIS)
    cols = w.reshape(w.shape[0], size, w.shape[1] // size)
    acc = h @ cols[:, (index - 1) % size]
    for k in range(1, size):
        acc = jax.lax.ppermute(acc, AXIS, _ring(size)) + h @ cols[:, (index - 1 - k) % size]
    return acc


class Split:
    """The column-parallel and row-parallel matmuls, and the norm, of one mode."""

    def __init__(self, mode: str, size: int, dtype):
        self.mode, self.size, self.dtype = mode, size, dtype

    def columns(self, x, kernel):          # kernel: [features, this device's outputs]
        kernel = kernel.astype(self.dtype)
        return gather_matmul(x, kernel, self.size) if self.mode == "async" else x @ kernel

    def rows(self, h, kernel, bias):       # kernel: [this device's inputs, features]; bias whole
        kernel, bias = kernel.astype(self.dtype), bias.astype(self.dtype)
        if self.mode == "async":
            return matmul_scatter(h, kernel, self.size) + local_features(bias, self.size)
        return jax.lax.psum(h @ kernel, AXIS) + bias

    def norm(self, p, x, epsilon=1e-6):
        """flax's LayerNorm (fast variance), its statistics summed over the axis where features are split."""
        y = x.astype(jnp.promote_types(x.dtype, jnp.float32))
        scale, bias = p["scale"], p["bias"]
        stats = jnp.stack([y.sum(-1), (y * y).sum(-1)])
        features = x.shape[-1]
        if self.mode == "async":
            stats, features = jax.lax.psum(stats, AXIS), features * self.size
            scale, bias = local_features(scale, self.size), local_features(bias, self.size)
        mean, mean2 = stats[0] / features, stats[1] / features
        var = jnp.maximum(0.0, mean2 - mean * mean)
        y = (y - mean[..., None]) * jax.lax.rsqrt(var + epsilon)[..., None]
        return (y * scale + bias).astype(self.dtype)


def make_block(config, mode: str, size: int, attention):
    """(params, x, mask) -> x: one Transformer block (MLP, then attention) on this device's shards."""
    c, split = config, Split(mode, size, config.dtype)

    def mlp(p, x):
        h = split.columns(split.norm(p["pre_norm"], x), p["input_layer"]["kernel"])
        h = nn.gelu(h + p["input_layer"]["bias"].astype(c.dtype))
        return split.rows(h, p["output_layer"]["kernel"], p["output_layer"]["bias"])

    def attn(p, x, mask):
        kernel, bias = p["qkv"]["kernel"], p["qkv"]["bias"]      # [H, heads/T, 3 hd], [heads/T, 3 hd]
        qkv = split.columns(split.norm(p["pre_norm"], x), kernel.reshape(kernel.shape[0], -1))
        qkv = (qkv + bias.reshape(-1).astype(c.dtype)).reshape(*x.shape[:-1], *bias.shape)
        q, k, v = jnp.split(qkv, 3, axis=-1)
        out = attention(q, k, v, mask, c.softmax_dtype)                # [..., heads/T, hd]
        out = out.reshape(*out.shape[:-2], -1)
        kernel = p["output_layer"]["kernel"]                            # [heads/T, hd, H]
        return split.rows(out, kernel.reshape(-1, kernel.shape[-1]), p["output_layer"]["bias"])

    if "MLP" in c.remat:
        mlp = jax.checkpoint(mlp, prevent_cse=False)
    if "Attn" in c.remat:
        attn = jax.checkpoint(attn, prevent_cse=False)

    def block(p, x, mask):
        x = x + mlp(p["mlp"], x)
        return x + attn(p["attn"], x, mask)

    return jax.checkpoint(block, prevent_cse=False) if "Block" in c.remat else block


def specs(tree, tensor: int, leading=()):
    """The shard_map spec of each leaf: 'tensor' on its split dimension (parallel.TENSOR_DIMS), the
    `leading` axes (e.g. ('pipe',) for stacked stage weights) on the first dimensions."""
    def spec(path, x):
        rank = getattr(x, "ndim", 0)
        dims = [None] * rank
        lead = leading(path) if callable(leading) else leading
        for i, name in enumerate(lead[:rank]):
            dims[i] = name
        split = tensor_dim(path, rank) if tensor > 1 else None
        if split is not None:
            dims[split] = AXIS
        return P(*dims)
    return jax.tree_util.tree_map_with_path(spec, tree)


def sum_replicated_grads(grads):
    """Gradients of leaves not split over 'tensor' (norms, output biases, embedding, head) hold one
    device's share of the loss there: sum them over the axis. Split leaves' are whole already."""
    return jax.tree_util.tree_map_with_path(
        lambda path, g: g if tensor_dim(path, g.ndim) is not None else jax.lax.psum(g, AXIS), grads)


def per_device_step(mesh, local_step, state_specs):
    """(train_step, shardings) of a step written per device: `local_step` under shard_map over
    `mesh`, the state laid out by `state_specs(state)`, metrics whole, the batch split over 'data';
    `shardings` gives the runner the same layout as (mesh, state, metrics, batch) shardings.
    Shared by this module and the pipeline (workloads/pipeline_parallel.py)."""
    from jax import shard_map
    from jax.sharding import NamedSharding

    def train_step(state, metrics, batch):
        sspecs = state_specs(state)
        mspecs = jax.tree_util.tree_map(lambda _: P(), metrics)
        bspecs = jax.tree_util.tree_map(lambda _: P("data"), batch)
        return shard_map(local_step, mesh=mesh, in_specs=(sspecs, mspecs, bspecs), out_specs=(sspecs, mspecs),
                         check_vma=False)(state, metrics, batch)

    def shardings(state_shape, metrics_shape, batch):
        named = lambda spec: NamedSharding(mesh, spec)  # noqa: E731
        state = jax.tree_util.tree_map(named, state_specs(state_shape), is_leaf=lambda x: isinstance(x, P))
        metrics = jax.tree_util.tree_map(lambda _: named(P()), metrics_shape)
        data = jax.tree_util.tree_map(lambda _: named(P("data")), batch)
        return mesh, state, metrics, data

    return train_step, shardings


def mesh_for(config: dict, axes: tuple[str, ...]):
    """The mesh over `axes` (sizes from the config), data major, on the first devices."""
    import numpy as np
    from jax.sharding import Mesh

    p = config["parallel"]
    sizes = {"data": max(1, p.get("data", 1)), "pipe": max(1, p.get("pipeline.stages", 1)),
             AXIS: max(1, p.get("tensor", 1))}
    shape = tuple(sizes[a] for a in axes)
    n = int(np.prod(shape))
    if jax.device_count() < n:
        from advisor.errors import AdvisorError
        settings = " x ".join(f"{a}={sizes[a]}" for a in axes)
        raise AdvisorError(f"the mesh {settings} needs {n} devices; JAX has {jax.device_count()}. On CPU, start with "
                           f"XLA_FLAGS=--xla_force_host_platform_device_count={n} (advisor run-workload sets it "
                           "itself when JAX has not started yet)")
    return Mesh(np.array(jax.devices()[:n]).reshape(shape), axes)


def embed(params, tokens, c):
    x = nn.Embed(c.vocab_size, c.hidden_size, dtype=c.dtype).apply({"params": params["embed"]}, tokens)
    return x + params["pos_emb"].astype(c.dtype)[None, : tokens.shape[1]]


def head(params, x, c):
    x = nn.LayerNorm(dtype=c.dtype).apply({"params": params["post_norm"]}, x)
    return nn.Dense(c.vocab_size, dtype=c.dtype).apply({"params": params["output_layer"]}, x).astype(jnp.float32)


def make(config: dict, model_config, attention, optimizer):
    """(train_step, shardings) of the async tensor-parallel Transformer over (data, tensor) under
    shard_map; the runner jits the step with the shardings' placement, as for the pipeline."""
    import numpy as np
    import optax

    from .train import accumulate_gradients

    c, p, o = model_config, config["parallel"], config["optimizer"]
    size, mode = p["tensor"], p.get("tensor.mode", "sync")
    mesh = mesh_for(config, ("data", AXIS))
    block = make_block(c, mode, size, attention)

    def forward(params, tokens):
        mask = nn.make_causal_mask(tokens, dtype=jnp.bool_) if c.causal_mask else None
        x = local_features(embed(params, tokens, c), size)
        if c.scan_layers:
            x, _ = jax.lax.scan(lambda h, w: (block(w, h, mask), None), x, params["block"])
        else:
            for i in range(c.num_layers):
                x = block(params[f"block_{i}"], x, mask)
        return head(params, gather_features(x), c)

    def loss_fn(params, _apply_fn, batch, _rng):
        logits = forward(params, batch.inputs)
        loss = optax.softmax_cross_entropy_with_integer_labels(logits, batch.labels)
        correct = jnp.equal(jnp.argmax(logits, axis=-1), batch.labels)
        count = np.prod(batch.labels.shape)
        metrics = {"loss": (loss.sum(), count), "accuracy": (correct.sum(), count)}
        # every tensor device computes the whole loss: each counts 1/T of it, so that the gradients
        # summed over the axis (and the rings' transposes) give the loss's gradient once
        return loss.mean() / size, metrics

    def local_step(state, metrics, batch):
        rng, step_rng = jax.random.split(state.rng)
        grads, step_metrics = accumulate_gradients(state, batch, step_rng, o["num_minibatches"], loss_fn,
                                                   o["accumulate"] == "scan")
        grads = jax.lax.pmean(sum_replicated_grads(grads), "data")
        step_metrics = jax.lax.psum(step_metrics, "data")
        new_state = state.apply_gradients(grads=grads, rng=rng)
        return new_state, jax.tree_util.tree_map(jnp.add, metrics, step_metrics)

    return per_device_step(mesh, local_step, lambda tree: specs(tree, size))
