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
import numpy as np
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


class BatchNormMLP(nn.Module):
    @nn.compact
    def __call__(self, x, train: bool):
        for width in (1024, 1024):
            x = nn.Dense(width)(x)
            x = nn.BatchNorm(use_running_average=not train)(x)
            x = nn.relu(x)
        return nn.Dense(10)(x)


def record_state_arguments(logdir: Path, kind: str, steps=2) -> Path:
    """Train steps that take their state as several arguments, none donated, as users write them:
    `step(params, batch_stats, opt_state, x, y)` (a Flax model with BatchNorm, Adam) and
    `step(params, opt_state, tokens)` (a token model whose batch is the third argument)."""
    tx = optax.adam(1e-3)
    key = jax.random.PRNGKey(0)
    if kind == "batchnorm":
        model = BatchNormMLP()
        x, y = jax.random.normal(key, (32, 512)), jnp.arange(32) % 10
        variables = model.init(key, x, train=False)
        params, batch_stats = variables["params"], variables["batch_stats"]
        opt_state = tx.init(params)

        @jax.jit
        def step(params, batch_stats, opt_state, x, y):
            def loss_fn(p):
                logits, updates = model.apply({"params": p, "batch_stats": batch_stats}, x, train=True,
                                              mutable=["batch_stats"])
                return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean(), updates
            (loss, updates), grads = jax.value_and_grad(loss_fn, has_aux=True)(params)
            changes, opt_state = tx.update(grads, opt_state, params)
            return optax.apply_updates(params, changes), updates["batch_stats"], opt_state, loss

        def run():
            nonlocal params, batch_stats, opt_state
            params, batch_stats, opt_state, loss = step(params, batch_stats, opt_state, x, y)
            return loss
    else:
        embed = jax.random.normal(key, (4096, 256)) * 0.02
        params = {"embed": embed, "out": jax.random.normal(key, (256, 4096)) * 0.02}
        opt_state = tx.init(params)
        tokens = jax.random.randint(key, (8, 64), 0, 4096)

        @jax.jit
        def step(params, opt_state, tokens):
            def loss_fn(p):
                logits = p["embed"][tokens[:, :-1]] @ p["out"]
                return optax.softmax_cross_entropy_with_integer_labels(logits, tokens[:, 1:]).mean()
            loss, grads = jax.value_and_grad(loss_fn)(params)
            changes, opt_state = tx.update(grads, opt_state, params)
            return optax.apply_updates(params, changes), opt_state, loss

        def run():
            nonlocal params, opt_state
            params, opt_state, loss = step(params, opt_state, tokens)
            return loss

    jax.block_until_ready(run())
    with jax.profiler.trace(str(logdir)):
        for i in range(steps):
            with jax.profiler.StepTraceAnnotation("step", step_num=i):
                loss = run()
        jax.block_until_ready(loss)
    return logdir


def record_antipattern(logdir: Path, kind: str, steps=4) -> Path:
    """A small regression step run with one of the classic host-side anti-patterns.

    recompile: the batch grows every step (a new shape, a new compile);
    print: the loss is converted to a Python float and printed every step;
    h2d: a fresh 32 MiB NumPy batch is passed (copied to the device) every step;
    clean: none of these, on a batch of 4,096 rows where the others use 256: a step of a few
    milliseconds, as the anti-patterns need to show, leaves the host's dispatch about a fifth of it
    on a busy machine (CI's full run: 0.67 ms idle in 3 ms steps, host-bound fired).
    """
    rng = np.random.default_rng(0)
    w = jnp.full((512, 512), 0.01, jnp.float32)
    big = rng.standard_normal((16384, 512), dtype=np.float32)      # 32 MiB
    device_big = jnp.asarray(big)

    rows = 4096 if kind == "clean" else 256

    @jax.jit
    def fit(w, x):
        loss, g = jax.value_and_grad(lambda w: jnp.mean(jnp.tanh(x[:rows] @ w) ** 2) + 1e-3 * jnp.mean(x))(w)
        return w - 0.1 * g, loss

    device_small = device_big[:64]
    for warm in (device_big, device_small):
        w, loss = fit(w, warm)
    loss.block_until_ready()
    with jax.profiler.trace(str(logdir)):
        for i in range(steps):
            with jax.profiler.StepTraceAnnotation("fit", step_num=i):
                if kind == "recompile":
                    x = device_big[: 4096 + 1024 * i]
                elif kind == "h2d":
                    x = big + i        # a new host array every step
                elif kind == "print":
                    x = device_small
                else:
                    x = device_big
                w, loss = fit(w, x)
                if kind == "print":
                    print(f"step {i}: loss {float(loss):.5f}")
                    print(np.asarray(w)[:4, :8])
            if kind != "print":
                loss.block_until_ready()
        jax.block_until_ready(w)
    return logdir


def record_unannotated(logdir: Path, steps=3) -> Path:
    """A training loop traced without StepTraceAnnotation, as many users record them."""
    w = jnp.full((256, 256), 0.01, jnp.float32)
    x = jax.random.normal(jax.random.PRNGKey(0), (512, 256))

    @jax.jit
    def fit(w):
        return w - 0.1 * jax.grad(lambda w: jnp.mean(jnp.tanh(x @ w) ** 2))(w)

    w = fit(w).block_until_ready()
    with jax.profiler.trace(str(logdir)):
        for _ in range(steps):
            w = fit(w)
        w.block_until_ready()
    return logdir


def record(kind: str, out: Path, *flags: str) -> None:
    if kind == "tower":
        record_tower(out, remat="remat" in flags, scan="unrolled" not in flags)
    elif kind == "wide":
        record_wide_no_donation(out, donate="donate" in flags)
    elif kind == "unannotated":
        record_unannotated(out)
    elif kind == "state_arguments":
        record_state_arguments(out, *flags)
    else:
        record_antipattern(out, kind)


def record_each(jobs: list[dict]) -> int:
    """Each job ({"args": [kind, out, *flags], "xla_flags": ...}) in a process of its own, forked from
    this one once jax and flax are imported (before any backend starts: each child starts its own, with
    its own XLA_FLAGS), one after the other. Returns how many failed."""
    import os
    import traceback

    failed = 0
    for job in jobs:
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                os.environ["XLA_FLAGS"] = job["xla_flags"]
                kind, out, *flags = job["args"]
                record(kind, Path(out), *flags)
                code = 0
            except BaseException:  # noqa: BLE001 - said on stderr, the parent counts it
                traceback.print_exc()
            finally:
                os._exit(code)
        failed += os.waitpid(pid, 0)[1] != 0
    return failed


if __name__ == "__main__":
    import json
    import sys
    if sys.argv[1] == "--each":       # a JSON list of jobs (record_each)
        sys.exit(1 if record_each(json.loads(sys.argv[2])) else 0)
    record(sys.argv[1], Path(sys.argv[2]), *sys.argv[3:])
