"""Plain Flax / JAX training programs, written the way a user would, without our workloads.

Their modules, parameters and step functions are named differently from ours on purpose:
the rules must not depend on our names.
"""

from __future__ import annotations

import functools
from pathlib import Path

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax


class Residual(nn.Module):
    width: int

    @nn.compact
    def __call__(self, h):
        y = nn.Dense(self.width * 4, name="up")(h)
        y = jnp.tanh(y)
        return h + nn.Dense(h.shape[-1], name="down")(y)


class Tower(nn.Module):
    depth: int
    width: int
    remat: bool
    scan: bool

    @nn.compact
    def __call__(self, h):
        cell = nn.remat(Residual, prevent_cse=False) if self.remat else Residual
        if self.scan:
            h, _ = nn.scan(lambda m, c, _: (m(c), None), variable_axes={"params": 0},
                           split_rngs={"params": True}, length=self.depth)(cell(self.width, name="cell"), h, ())
        else:
            for i in range(self.depth):
                h = cell(self.width, name=f"cell{i}")(h)
        return h.mean(-1)


def record_tower(logdir: Path, *, remat: bool, scan: bool = True, donate: bool = True,
                 batch=(32, 128, 64), depth=4, width=64, steps=2) -> Path:
    """Train a residual tower for a few steps under the profiler; returns the logdir."""
    model = Tower(depth, width, remat, scan)
    x = jax.random.normal(jax.random.PRNGKey(1), batch)
    params = model.init(jax.random.PRNGKey(0), x)["params"]
    opt = optax.sgd(1e-2, momentum=0.9)
    opt_state = opt.init(params)

    def update(params, opt_state, x):
        loss, grads = jax.value_and_grad(lambda p: jnp.mean(model.apply({"params": p}, x) ** 2))(params)
        updates, opt_state = opt.update(grads, opt_state)
        return optax.apply_updates(params, updates), opt_state, loss

    update = jax.jit(update, donate_argnums=(0, 1) if donate else ())
    params, opt_state, loss = update(params, opt_state, x)
    loss.block_until_ready()
    with jax.profiler.trace(str(logdir)):
        for i in range(steps):
            with jax.profiler.StepTraceAnnotation("iteration", step_num=i):
                params, opt_state, loss = update(params, opt_state, x)
        loss.block_until_ready()
    return logdir


def record_wide_no_donation(logdir: Path, *, donate: bool, steps=2) -> Path:
    """A plain JAX regression step whose parameters outweigh its activations."""
    keys = jax.random.split(jax.random.PRNGKey(0), 3)
    params = {"w1": jax.random.normal(keys[0], (1024, 1024)) * 0.01,
              "w2": jax.random.normal(keys[1], (1024, 1024)) * 0.01}
    x = jax.random.normal(keys[2], (16, 1024))

    @functools.partial(jax.jit, donate_argnums=(0,) if donate else ())
    def sgd(params, x):
        def loss(p):
            return jnp.mean((jnp.maximum(x @ p["w1"], 0) @ p["w2"]) ** 2)
        grads = jax.grad(loss)(params)
        return jax.tree_util.tree_map(lambda p, g: p - 0.1 * g, params, grads)

    params = sgd(params, x)
    jax.block_until_ready(params)
    with jax.profiler.trace(str(logdir)):
        for i in range(steps):
            with jax.profiler.StepTraceAnnotation("step", step_num=i):
                params = sgd(params, x)
        jax.block_until_ready(params)
    return logdir


if __name__ == "__main__":
    import sys
    kind, out = sys.argv[1], Path(sys.argv[2])
    if kind == "tower":
        record_tower(out, remat="remat" in sys.argv, scan="unrolled" not in sys.argv)
    elif kind == "wide":
        record_wide_no_donation(out, donate="donate" in sys.argv)
