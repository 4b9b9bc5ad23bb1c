"""Fully sharded data parallelism (ZeRO-3, as Part 2.2): the MLP of data_parallel.py with its
weights and Adam state sharded over the 'data' axis of 8 (simulated CPU) devices by `jax.jit`
shardings (first dimension split), so XLA all-gathers each weight before use and
reduce-scatters its gradient. Biases stay replicated (small). Warm, 4 annotated steps."""
import sys

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

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


def train_step(params, opt_state, x, y):
    loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
    updates, opt_state = tx.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss


def main(logdir):
    mesh = Mesh(np.array(jax.devices()), ("data",))
    data = NamedSharding(mesh, P("data"))

    def shard(leaf):   # split every leaf with a first dimension of at least 2 KiB worth over 'data'
        spec = P("data") if leaf.ndim == 2 else P()
        return jax.device_put(leaf, NamedSharding(mesh, spec))

    params = jax.tree.map(shard, init_params(jax.random.PRNGKey(0)))
    opt_state = jax.tree.map(shard, tx.init(params))
    x = jax.device_put(jax.random.normal(jax.random.PRNGKey(1), (BATCH, WIDTH)), data)
    y = jax.device_put(jnp.tanh(x[:, ::-1]), data)
    state_sharding = jax.tree.map(lambda a: a.sharding, (params, opt_state))
    step = jax.jit(train_step, donate_argnums=(0, 1),
                   out_shardings=(*state_sharding, NamedSharding(mesh, P())))
    params, opt_state, loss = step(params, opt_state, x, y)
    loss.block_until_ready()
    with jax.profiler.trace(logdir):
        for i in range(4):
            with jax.profiler.StepTraceAnnotation("train", step_num=i):
                params, opt_state, loss = step(params, opt_state, x, y)
        loss.block_until_ready()


if __name__ == "__main__":
    main(sys.argv[1])
