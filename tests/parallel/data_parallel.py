"""Data parallelism as Part 2.1 does it: an MLP trained with Adam under `shard_map` over a
'data' mesh axis of 8 (simulated CPU) devices. The batch is split over the axis; parameters
and optimizer state are replicated (every device holds a full copy); gradients are averaged
with `pmean` (an all-reduce). State donated, warm, 4 annotated steps."""
import functools
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


def main(logdir):
    mesh = Mesh(np.array(jax.devices()), ("data",))

    @functools.partial(jax.shard_map, mesh=mesh, in_specs=(P(), P(), P("data"), P("data")),
                       out_specs=(P(), P(), P()))
    def train_step(params, opt_state, x, y):
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        grads = jax.lax.pmean(grads, "data")
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, jax.lax.pmean(loss, "data")

    step = jax.jit(train_step, donate_argnums=(0, 1))
    rep, data = NamedSharding(mesh, P()), NamedSharding(mesh, P("data"))
    params = jax.device_put(init_params(jax.random.PRNGKey(0)), rep)
    opt_state = jax.device_put(tx.init(params), rep)
    x = jax.device_put(jax.random.normal(jax.random.PRNGKey(1), (BATCH, WIDTH)), data)
    y = jax.device_put(jnp.tanh(x[:, ::-1]), data)
    params, opt_state, loss = step(params, opt_state, x, y)
    loss.block_until_ready()
    with jax.profiler.trace(logdir):
        for i in range(4):
            with jax.profiler.StepTraceAnnotation("train", step_num=i):
                params, opt_state, loss = step(params, opt_state, x, y)
        loss.block_until_ready()


if __name__ == "__main__":
    main(sys.argv[1])
