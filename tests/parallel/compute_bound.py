"""Compute-bound data parallelism: a narrow MLP (0.8 MiB of weights, replicated) on a large batch
split over 8 (simulated CPU) devices, so each step's matmuls dwarf its small gradient
all-reduce. `jax.jit` shardings, SGD, state donated, warm, 4 annotated steps."""
import sys

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

WIDTH, DEPTH, BATCH = 256, 3, 8192
tx = optax.sgd(1e-2)


def loss_fn(params, x, y):
    h = x
    for w in params:
        h = jnp.tanh(h @ w)
    return jnp.mean((h - y) ** 2)


def train_step(params, opt_state, x, y):
    loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
    updates, opt_state = tx.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss


def main(logdir):
    mesh = Mesh(np.array(jax.devices()), ("data",))
    rep, data = NamedSharding(mesh, P()), NamedSharding(mesh, P("data"))
    keys = jax.random.split(jax.random.PRNGKey(0), DEPTH + 1)
    params = jax.device_put([jax.random.normal(k, (WIDTH, WIDTH)) / WIDTH ** 0.5 for k in keys[:-1]], rep)
    opt_state = tx.init(params)
    x = jax.device_put(jax.random.normal(keys[-1], (BATCH, WIDTH)), data)
    y = jax.device_put(jnp.tanh(x[:, ::-1]), data)
    step = jax.jit(train_step, donate_argnums=(0, 1), out_shardings=(rep, rep, rep))
    params, opt_state, loss = step(params, opt_state, x, y)
    loss.block_until_ready()
    with jax.profiler.trace(logdir):
        for i in range(4):
            with jax.profiler.StepTraceAnnotation("train", step_num=i):
                params, opt_state, loss = step(params, opt_state, x, y)
        loss.block_until_ready()


if __name__ == "__main__":
    main(sys.argv[1])
