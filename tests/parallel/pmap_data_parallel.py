"""Data parallelism the older way: `jax.pmap` over 8 (simulated CPU) devices, the MLP and Adam
of data_parallel.py with parameters and optimizer state stacked once per device (a full copy
on each), gradients averaged with `pmean`. Warm, 4 annotated steps."""
import functools
import sys

import jax
import jax.numpy as jnp
import optax

WIDTH, DEPTH, BATCH = 512, 4, 256
tx = optax.adam(1e-3)


def init_params(key):
    keys = jax.random.split(key, DEPTH)
    return [{"w": jax.random.normal(k, (WIDTH, WIDTH)) / WIDTH ** 0.5, "b": jnp.zeros(WIDTH)} for k in keys]


def loss_fn(params, x, y):
    h = x
    for layer in params:
        h = jnp.tanh(h @ layer["w"] + layer["b"])
    return jnp.mean((h - y) ** 2)


@functools.partial(jax.pmap, axis_name="data", donate_argnums=(0, 1))
def train_step(params, opt_state, x, y):
    loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
    grads = jax.lax.pmean(grads, "data")
    updates, opt_state = tx.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, jax.lax.pmean(loss, "data")


def main(logdir):
    devices = jax.devices()
    n = len(devices)
    params = init_params(jax.random.PRNGKey(0))
    params, opt_state = jax.tree.map(lambda a: jnp.broadcast_to(a, (n, *a.shape)), (params, tx.init(params)))
    x = jax.random.normal(jax.random.PRNGKey(1), (n, BATCH // n, WIDTH))
    y = jnp.tanh(x[..., ::-1])
    params, opt_state, loss = train_step(params, opt_state, x, y)
    loss.block_until_ready()
    with jax.profiler.trace(logdir):
        for i in range(4):
            with jax.profiler.StepTraceAnnotation("train", step_num=i):
                params, opt_state, loss = train_step(params, opt_state, x, y)
        loss.block_until_ready()


if __name__ == "__main__":
    main(sys.argv[1])
