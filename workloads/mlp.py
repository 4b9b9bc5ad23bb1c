"""The MLP classifier of the tutorial's Part 1.1 (mixed precision, remat, gradient accumulation)."""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

from .mlp_spec import DTYPES, PRESETS, SCHEMA, remedy_config, validate  # noqa: F401
from .train import Batch, Built, initial_state, make_train_step


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
        return initial_state(lambda rng: model.init(rng, batch.inputs, train=False)["params"], model.apply,
                             optimizer, t["seed"])

    def num_params():
        shapes = jax.eval_shape(lambda: model.init(jax.random.PRNGKey(0), batch.inputs, train=False)["params"])
        return int(sum(np.prod(x.shape) for x in jax.tree_util.tree_leaves(shapes)))

    def eval_loss(params) -> float:
        logits = jax.jit(lambda p, x: model.apply({"params": p}, x, train=False))(params, batch.inputs)
        return float(optax.softmax_cross_entropy_with_integer_labels(logits, batch.labels).mean())

    step = make_train_step(classification_loss, o["num_minibatches"], o["accumulate"] == "scan")
    return Built(train_step=step, init_state=init_state, batch=batch, loss_fn=classification_loss,
                 donate=t["donate"], num_params=num_params, eval_loss=eval_loss)
