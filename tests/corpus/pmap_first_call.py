"""Data-parallel MLP with `jax.pmap` over 8 (simulated CPU) devices and SGD, traced from the
first call: step 0 compiles the step once; gradients are averaged with `lax.pmean`."""
import functools
import sys

import jax
import jax.numpy as jnp
import numpy as np


def init(key, sizes):
    keys = jax.random.split(key, len(sizes) - 1)
    return [(jax.random.normal(k, (a, b)) / np.sqrt(a), jnp.zeros(b)) for k, a, b in zip(keys, sizes[:-1], sizes[1:])]


def forward(params, x):
    for w, b in params[:-1]:
        x = jax.nn.relu(x @ w + b)
    w, b = params[-1]
    return x @ w + b


@functools.partial(jax.pmap, axis_name="batch")
def train_step(params, x, y):
    loss, grads = jax.value_and_grad(lambda p: jnp.mean((forward(p, x) - y) ** 2))(params)
    grads = jax.lax.pmean(grads, "batch")
    return jax.tree_util.tree_map(lambda p, g: p - 0.05 * g, params, grads), jax.lax.pmean(loss, "batch")


def main(logdir):
    n = jax.local_device_count()
    with jax.profiler.trace(logdir):
        params = init(jax.random.PRNGKey(0), [64, 256, 256, 1])
        params = jax.tree_util.tree_map(lambda a: jnp.broadcast_to(a, (n, *a.shape)), params)
        x = jax.random.normal(jax.random.PRNGKey(1), (n, 128, 64))
        y = jnp.sum(x, axis=-1, keepdims=True)
        for step in range(5):
            params, loss = train_step(params, x, y)
        loss.block_until_ready()


if __name__ == "__main__":
    main(sys.argv[1])
