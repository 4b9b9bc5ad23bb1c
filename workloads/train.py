"""Training-step pieces shared by the bundled workloads (Part 1.1 of the tutorial)."""

from __future__ import annotations  # noqa: I001 - no line moves: traces name this file's lines (train.py:29)

import dataclasses
from typing import Any, Callable

import jax
import jax.numpy as jnp
import optax
from flax import struct
from flax.training import train_state



class TrainState(train_state.TrainState):
    rng: jax.Array


@struct.dataclass
class Batch:
    inputs: jax.Array
    labels: jax.Array


def accumulate_gradients(state, batch, rng, num_minibatches: int, loss_fn: Callable, use_scan: bool):
    """Gradients and metrics summed over `num_minibatches` slices of the batch."""
    minibatch_size = batch.inputs.shape[0] // num_minibatches
    rngs = jax.random.split(rng, num_minibatches)
    grad_fn = jax.value_and_grad(loss_fn, has_aux=True)

    def minibatch_step(idx):
        minibatch = jax.tree_util.tree_map(
            lambda x: jax.lax.dynamic_slice_in_dim(x, idx * minibatch_size, minibatch_size, axis=0), batch)
        (_, metrics), grads = grad_fn(state.params, state.apply_fn, minibatch, rngs[idx])
        return grads, metrics

    if num_minibatches == 1:
        grads, metrics = minibatch_step(0)
    elif use_scan:
        grads_shape, metrics_shape = jax.eval_shape(minibatch_step, 0)
        zeros = jax.tree_util.tree_map(lambda x: jnp.zeros(x.shape, x.dtype), (grads_shape, metrics_shape))

        def scan_step(carry, idx):
            return jax.tree_util.tree_map(jnp.add, carry, minibatch_step(idx)), None

        (grads, metrics), _ = jax.lax.scan(scan_step, zeros, jnp.arange(num_minibatches))
    else:
        grads, metrics = None, None
        for idx in range(num_minibatches):
            with jax.named_scope(f"minibatch_{idx}"):
                step = minibatch_step(idx)
            grads, metrics = step if grads is None else jax.tree_util.tree_map(jnp.add, (grads, metrics), step)
    grads = jax.tree_util.tree_map(lambda g: g / num_minibatches, grads)
    return grads, metrics


def make_train_step(loss_fn: Callable, num_minibatches: int, use_scan: bool):
    """The tutorial's train step: accumulate gradients, apply them, add up metrics."""
    def train_step(state: TrainState, metrics: Any, batch: Batch):
        rng, step_rng = jax.random.split(state.rng)
        grads, step_metrics = accumulate_gradients(state, batch, step_rng, num_minibatches, loss_fn, use_scan)
        new_state = state.apply_gradients(grads=grads, rng=rng)
        metrics = jax.tree_util.tree_map(jnp.add, metrics, step_metrics)
        return new_state, metrics
    return train_step


def initial_state(init_params: Callable, apply_fn: Callable, optimizer, seed: int) -> TrainState:
    """The train state from `init_params(rng)` built by one compiled program: run op by op, the model's
    and the optimizer's state would compile a small program per shape. Its step counter stays the
    Python int 0 of TrainState.create, as the step program expects."""
    def make(rng):
        model_rng, state_rng = jax.random.split(rng)
        return TrainState.create(apply_fn=apply_fn, params=init_params(model_rng), tx=optimizer, rng=state_rng)
    return jax.jit(make)(jax.random.PRNGKey(seed)).replace(step=0)


def zero_metrics(loss_fn: Callable, state: TrainState, batch: Batch):
    """Zeros shaped like the metrics `loss_fn` returns, found by shape evaluation."""
    shapes = jax.eval_shape(lambda s, b: loss_fn(s.params, s.apply_fn, b, s.rng)[1], state, batch)
    return jax.tree_util.tree_map(lambda x: jnp.zeros(x.shape, x.dtype), shapes)


def learning_rate_schedule(peak: float, warmup_steps: int = 10):
    return optax.warmup_exponential_decay_schedule(
        init_value=0.0, peak_value=peak, warmup_steps=warmup_steps, transition_steps=1, decay_rate=0.99)


@dataclasses.dataclass
class Built:
    """Everything a runner needs to profile a workload's train step."""
    train_step: Callable          # (state, metrics, batch) -> (state, metrics), not jitted
    init_state: Callable          # () -> TrainState
    batch: Batch
    loss_fn: Callable             # (params, apply_fn, batch, rng) -> (loss, metrics)
    donate: bool
    num_params: Callable          # () -> int, via shape evaluation
    eval_loss: Callable           # (params) -> float: the loss without dropout, to check numerics
    # (state, metrics) -> the same, placed on the devices the step expects (sharded when parallel.data > 1)
    place: Callable = lambda state, metrics: (state, metrics)
    # (state_shape, metrics_shape, batch) -> (mesh, state, metrics, batch) shardings, for a step that
    # builds its own mesh (the pipeline); None: parallel.shardings decides
    shardings: Any = None
    mesh_axes: Any = None       # [(name, size), ...] of that mesh, recorded with the run
