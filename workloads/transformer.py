"""The GPT-style Transformer of the tutorial (UvA DL notebooks, Part 1.2), with its config surface."""

from __future__ import annotations

import functools
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

from .train import Batch, Built, initial_state, learning_rate_schedule, make_train_step
from .transformer_spec import DTYPES, PRESETS, REMAT_CHOICES, SCHEMA, remedy_config, validate  # noqa: F401


def dot_product_attention(query, key, value, mask, softmax_dtype):
    """Attention with the logits and softmax in `softmax_dtype` for numerical stability."""
    dtype = query.dtype
    query = query * query.shape[-1] ** -0.5
    query, key = query.astype(softmax_dtype), key.astype(softmax_dtype)
    weights = jnp.einsum("...qhd,...khd->...hqk", query, key)
    if mask is not None:
        weights = jnp.where(mask, weights, jnp.finfo(softmax_dtype).min)
    weights = nn.softmax(weights, axis=-1).astype(dtype)
    return jnp.einsum("...hqk,...khd->...qhd", weights, value).astype(dtype)


class MLPBlock(nn.Module):
    config: Any
    train: bool

    @nn.compact
    def __call__(self, x):
        c = self.config
        features = x.shape[-1]
        x = nn.LayerNorm(dtype=c.dtype, name="pre_norm")(x)
        x = nn.Dense(c.mlp_expansion * features, dtype=c.dtype, name="input_layer")(x)
        x = nn.gelu(x)
        x = nn.Dense(features, dtype=c.dtype, name="output_layer")(x)
        return nn.Dropout(rate=c.dropout_rate, deterministic=not self.train)(x)


class AttentionBlock(nn.Module):
    config: Any
    mask: Any
    train: bool

    @nn.compact
    def __call__(self, x):
        c = self.config
        features = x.shape[-1]
        x = nn.LayerNorm(dtype=c.dtype, name="pre_norm")(x)
        qkv = nn.DenseGeneral((c.num_heads, c.head_dim * 3), dtype=c.dtype, name="qkv")(x)
        q, k, v = jnp.split(qkv, 3, axis=-1)
        x = dot_product_attention(q, k, v, self.mask, c.softmax_dtype)
        x = nn.DenseGeneral(features, axis=(-2, -1), dtype=c.dtype, name="output_layer")(x)
        return nn.Dropout(rate=c.dropout_rate, deterministic=not self.train)(x)


class TransformerBlock(nn.Module):
    config: Any
    mask: Any
    train: bool

    @nn.compact
    def __call__(self, x):
        mlp, attn = MLPBlock, AttentionBlock
        if "MLP" in self.config.remat:
            mlp = nn.remat(mlp, prevent_cse=False)
        if "Attn" in self.config.remat:
            attn = nn.remat(attn, prevent_cse=False)
        x = x + mlp(config=self.config, train=self.train, name="mlp")(x)
        return x + attn(config=self.config, mask=self.mask, train=self.train, name="attn")(x)


class Transformer(nn.Module):
    config: Any

    @nn.compact
    def __call__(self, x, train: bool = True):
        c = self.config
        mask = nn.make_causal_mask(x, dtype=jnp.bool_) if c.causal_mask else None
        x = nn.Embed(c.vocab_size, c.hidden_size, dtype=c.dtype, name="embed")(x)
        pos_emb = self.param("pos_emb", nn.initializers.normal(stddev=0.02), (c.max_seq_len, c.hidden_size))
        x = x + pos_emb.astype(c.dtype)[None, : x.shape[1]]
        block_fn = functools.partial(TransformerBlock, config=c, mask=mask, train=train)
        if "Block" in c.remat:
            block_fn = nn.remat(block_fn, prevent_cse=False)
        if c.scan_layers:
            x, _ = nn.scan(
                lambda module, carry, _: (module(carry), None),
                variable_axes={"params": 0},
                split_rngs={"params": True, "dropout": True},
                length=c.num_layers,
            )(block_fn(name="block"), x, ())
        else:
            for i in range(c.num_layers):
                x = block_fn(name=f"block_{i}")(x)
        x = nn.LayerNorm(dtype=c.dtype, name="post_norm")(x)
        x = nn.Dense(c.vocab_size, dtype=c.dtype, name="output_layer")(x)
        return x.astype(jnp.float32)


class ModelConfig:
    """Attribute view of the model section, with the derived fields the modules read."""

    def __init__(self, config: dict):
        m, d = config["model"], config["data"]
        self.__dict__.update(m)
        self.dtype = jnp.dtype(m["dtype"])
        self.softmax_dtype = jnp.dtype(m["softmax_dtype"])
        self.num_heads = m["hidden_size"] // m["head_dim"]
        self.max_seq_len = d["seq_len"]
        self.vocab_size = d["vocab_size"]

    def __hash__(self):
        return hash(tuple(sorted((k, str(v)) for k, v in self.__dict__.items())))

    def __eq__(self, other):
        return isinstance(other, ModelConfig) and self.__dict__ == other.__dict__


def next_token_pred_loss(params, apply_fn, batch, rng):
    logits = apply_fn({"params": params}, batch.inputs, train=True, rngs={"dropout": rng})
    loss = optax.softmax_cross_entropy_with_integer_labels(logits, batch.labels)
    correct = jnp.equal(jnp.argmax(logits, axis=-1), batch.labels)
    count = np.prod(batch.labels.shape)
    metrics = {"loss": (loss.sum(), count), "accuracy": (correct.sum(), count)}
    return loss.mean(), metrics


def build(config: dict) -> Built:
    validate(config)
    d, o, t = config["data"], config["optimizer"], config["train"]
    model = Transformer(config=ModelConfig(config))
    tokens = jax.random.randint(jax.random.PRNGKey(0), (d["batch_size"], d["seq_len"]), 1, d["vocab_size"])
    batch = Batch(inputs=jnp.pad(tokens[:, :-1], ((0, 0), (1, 0)), constant_values=0), labels=tokens)
    minibatch = batch.inputs[: d["batch_size"] // o["num_minibatches"]]
    optimizer = optax.adam(learning_rate_schedule(o["learning_rate"]))

    # Parameters are always initialized through the scanned model, then unstacked for the
    # unrolled one: both then compute the same function, so a verified change can be checked
    # for equal losses.
    scanned = Transformer(config=ModelConfig({**config, "model": {**config["model"], "scan_layers": True}}))

    def init_params(rng):
        params = scanned.init(rng, minibatch, train=False)["params"]
        if config["model"]["scan_layers"]:
            return params
        params = dict(params)
        stacked = params.pop("block")
        for i in range(config["model"]["num_layers"]):
            params[f"block_{i}"] = jax.tree_util.tree_map(lambda x, i=i: x[i], stacked)
        return params

    def init_state():
        return initial_state(init_params, model.apply, optimizer, t["seed"])

    def eval_loss(params) -> float:
        logits = jax.jit(lambda p, x: model.apply({"params": p}, x, train=False))(params, batch.inputs)
        return float(optax.softmax_cross_entropy_with_integer_labels(logits, batch.labels).mean())

    def num_params():
        shapes = jax.eval_shape(init_params, jax.random.PRNGKey(0))
        return int(sum(np.prod(x.shape) for x in jax.tree_util.tree_leaves(shapes)))

    step = make_train_step(next_token_pred_loss, o["num_minibatches"], o["accumulate"] == "scan")
    built = Built(train_step=step, init_state=init_state, batch=batch, loss_fn=next_token_pred_loss,
                  donate=t["donate"], num_params=num_params, eval_loss=eval_loss)
    p = config["parallel"]
    stages, tensor = p.get("pipeline.stages", 1), p.get("tensor", 1)
    if stages > 1:
        from . import pipeline_parallel
        built.train_step, built.shardings = pipeline_parallel.make(config, ModelConfig(config), TransformerBlock,
                                                                   optimizer, dot_product_attention)
        built.mesh_axes = [("data", p["data"]), ("pipe", stages)] + ([("tensor", tensor)] if tensor > 1 else [])
    elif tensor > 1 and p.get("tensor.mode") == "async":
        from . import tensor as tensor_parallel
        built.train_step, built.shardings = tensor_parallel.make(config, ModelConfig(config), dot_product_attention,
                                                                 optimizer)
        built.mesh_axes = [("data", p["data"]), ("tensor", tensor)]
    return built
