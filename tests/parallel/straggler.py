"""A straggler: data-parallel training over 8 (simulated CPU) devices under `shard_map`, where
device 5's shard needs 64 times the preprocessing work on device (a feature-mixing loop whose
trip count comes with the data, as with unevenly packed sequences): the other seven wait for
it at the gradient all-reduce every step. Small replicated state, warm, 4 annotated steps."""
import functools
import sys

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

WIDTH, BATCH, SLOW_DEVICE = 256, 256, 5
tx = optax.sgd(1e-2)


def loss_fn(params, x, y):
    h = jnp.tanh(x @ params["w"] + params["b"])
    return jnp.mean((h - y) ** 2)


def preprocess(x, iters):
    mix = jnp.eye(WIDTH) * 0.5 + 0.5 / WIDTH
    return jax.lax.fori_loop(0, iters, lambda _, h: jnp.tanh(h @ mix), x)


def main(logdir):
    devices = jax.devices()
    mesh = Mesh(np.array(devices), ("data",))

    @functools.partial(jax.shard_map, mesh=mesh, in_specs=(P(), P(), P("data"), P("data"), P("data")),
                       out_specs=(P(), P(), P()))
    def train_step(params, opt_state, x, y, iters):
        x = preprocess(x, iters[0])
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        grads = jax.lax.pmean(grads, "data")
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, jax.lax.pmean(loss, "data")

    step = jax.jit(train_step, donate_argnums=(0, 1))
    rep, data = NamedSharding(mesh, P()), NamedSharding(mesh, P("data"))
    k1, k2 = jax.random.split(jax.random.PRNGKey(0))
    params = jax.device_put({"w": jax.random.normal(k1, (WIDTH, WIDTH)) / WIDTH ** 0.5,
                             "b": jnp.zeros(WIDTH)}, rep)
    opt_state = jax.device_put(tx.init(params), rep)
    x = jax.device_put(jax.random.normal(k2, (BATCH, WIDTH)), data)
    y = jax.device_put(jnp.tanh(x[:, ::-1]), data)
    iters = np.full(len(devices), 4, np.int32)
    iters[SLOW_DEVICE] = 256
    iters = jax.device_put(iters, data)
    params, opt_state, loss = step(params, opt_state, x, y, iters)
    loss.block_until_ready()
    with jax.profiler.trace(logdir):
        for i in range(4):
            with jax.profiler.StepTraceAnnotation("train", step_num=i):
                params, opt_state, loss = step(params, opt_state, x, y, iters)
        loss.block_until_ready()


if __name__ == "__main__":
    main(sys.argv[1])
