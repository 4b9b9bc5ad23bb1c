"""The MLP classifier of the tutorial's Part 1.1 (mixed precision, remat, gradient accumulation)."""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

from . import config as cfg
from . import parallel
from .train import Batch, Built, TrainState, make_train_step, shared_remedy_config

DTYPES = ("float32", "bfloat16", "float16")

SCHEMA = {
    "data": {
        "batch_size": cfg.Field(512, cfg.parse_int, "examples per step"),
        "num_inputs": cfg.Field(128, cfg.parse_int, "input features"),
        "num_classes": cfg.Field(100, cfg.parse_int, "output classes"),
    },
    "model": {
        "hidden_size": cfg.Field(256, cfg.parse_int, "hidden width"),
        "num_layers": cfg.Field(1, cfg.parse_int, "hidden Dense/LayerNorm/SiLU layers"),
        "dropout_rate": cfg.Field(0.1, cfg.parse_float, "dropout rate"),
        "dtype": cfg.Field("bfloat16", cfg.parse_choice(DTYPES), "compute dtype (parameters stay float32)", DTYPES),
        "remat": cfg.Field(False, cfg.parse_bool, "rematerialize each hidden layer"),
    },
    "optimizer": {
        "learning_rate": cfg.Field(1e-3, cfg.parse_float, "Adam learning rate"),
        "num_minibatches": cfg.Field(4, cfg.parse_int, "gradient accumulation steps"),
        "accumulate": cfg.Field("scan", cfg.parse_choice(("scan", "loop")), "accumulate by lax.scan or a Python loop",
                                ("scan", "loop")),
    },
    "train": {
        "donate": cfg.Field(True, cfg.parse_bool, "donate the train state and metrics to the step"),
        "steps": cfg.Field(3, cfg.parse_int, "profiled steps"),
        "seed": cfg.Field(0, cfg.parse_int, "random seed"),
    },
    "parallel": parallel.SCHEMA,
}

PRESETS = {
    "seed": {},
    "tiny": {"model.dtype": "float32", "optimizer.num_minibatches": 1},
}


def remedy_config(remedy, config: dict) -> dict:
    """The MLP's config keys for each remedy (advisor.remedies.Kind), from the current config."""
    if getattr(remedy.kind, "value", remedy.kind) == "remat":
        return {} if config.get("model", {}).get("remat") else {"model.remat": True}
    return shared_remedy_config(remedy, config)   # no layer scan to unroll


class Layer(nn.Module):
    hidden_size: int
    dtype: Any
    dropout_rate: float
    train: bool

    @nn.compact
    def __call__(self, x):
        x = nn.Dense(self.hidden_size, dtype=self.dtype)(x)
        x = nn.LayerNorm(dtype=self.dtype)(x)
        x = nn.silu(x)
        return nn.Dropout(rate=self.dropout_rate, deterministic=not self.train)(x)


class MLPClassifier(nn.Module):
    hidden_size: int
    num_layers: int
    num_classes: int
    dropout_rate: float
    dtype: Any
    remat: bool

    @nn.compact
    def __call__(self, x, train: bool = True):
        layer = nn.remat(Layer, prevent_cse=False) if self.remat else Layer
        for _ in range(self.num_layers):
            x = layer(self.hidden_size, self.dtype, self.dropout_rate, train)(x)
        x = nn.Dense(self.num_classes, dtype=self.dtype)(x)
        return nn.log_softmax(x.astype(jnp.float32), axis=-1)


def classification_loss(params, apply_fn, batch, rng):
    logits = apply_fn({"params": params}, batch.inputs, train=True, rngs={"dropout": rng})
    loss = optax.softmax_cross_entropy_with_integer_labels(logits, batch.labels)
    correct = jnp.equal(jnp.argmax(logits, axis=-1), batch.labels)
    count = batch.inputs.shape[0]
    return loss.mean(), {"loss": (loss.sum(), count), "accuracy": (correct.sum(), count)}


def validate(config: dict) -> None:
    parallel.validate(config)
    d, o = config["data"], config["optimizer"]
    if o["num_minibatches"] == 0 or d["batch_size"] % o["num_minibatches"]:
        raise cfg.ConfigError(f"data.batch_size ({d['batch_size']}) must be a multiple of optimizer.num_minibatches ({o['num_minibatches']})")
    if min(d["batch_size"], d["num_inputs"], d["num_classes"], config["model"]["hidden_size"]) < 1:
        raise cfg.ConfigError("data sizes and model.hidden_size must be at least 1")


def build(config: dict) -> Built:
    validate(config)
    d, m, o, t = config["data"], config["model"], config["optimizer"], config["train"]
    model = MLPClassifier(m["hidden_size"], m["num_layers"], d["num_classes"], m["dropout_rate"],
                          jnp.dtype(m["dtype"]), m["remat"])
    input_rng, label_rng = jax.random.split(jax.random.PRNGKey(0))
    batch = Batch(inputs=jax.random.normal(input_rng, (d["batch_size"], d["num_inputs"])),
                  labels=jax.random.randint(label_rng, (d["batch_size"],), 0, d["num_classes"]))
    optimizer = optax.adam(o["learning_rate"])

    def init_state():
        model_rng, state_rng = jax.random.split(jax.random.PRNGKey(t["seed"]))
        params = model.init(model_rng, batch.inputs, train=False)["params"]
        return TrainState.create(apply_fn=model.apply, params=params, tx=optimizer, rng=state_rng)

    def num_params():
        shapes = jax.eval_shape(lambda: model.init(jax.random.PRNGKey(0), batch.inputs, train=False)["params"])
        return int(sum(np.prod(x.shape) for x in jax.tree_util.tree_leaves(shapes)))

    def eval_loss(params) -> float:
        logits = jax.jit(lambda p, x: model.apply({"params": p}, x, train=False))(params, batch.inputs)
        return float(optax.softmax_cross_entropy_with_integer_labels(logits, batch.labels).mean())

    step = make_train_step(classification_loss, o["num_minibatches"], o["accumulate"] == "scan")
    return Built(train_step=step, init_state=init_state, batch=batch, loss_fn=classification_loss,
                 donate=t["donate"], num_params=num_params, eval_loss=eval_loss)
