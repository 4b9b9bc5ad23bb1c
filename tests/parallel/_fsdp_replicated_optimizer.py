"""FSDP parameters beside replicated optimizer state: the MLP of fsdp.py, its weights split over the
'data' axis of 8 (simulated CPU) devices, and AdamW's state built by `jax.jit(tx.init)` with a
replicated out_sharding (`replicated`: two thirds of the train state then sit whole on every device)
or with the parameters' shardings (`sharded`: the state split like the parameters). The step keeps
the state's shardings (in and out), as a training loop does that takes them from its arrays.
Warm, 4 annotated steps. Recorded by tests/test_replicated_optimizer_state.py (slow)."""
import sys

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

WIDTH, DEPTH, BATCH = 512, 4, 256
tx = optax.adamw(1e-3)


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


def main(logdir, layout):
    mesh = Mesh(np.array(jax.devices()), ("data",))
    data, replicated = NamedSharding(mesh, P("data")), NamedSharding(mesh, P())

    def spec(leaf):
        return NamedSharding(mesh, P("data") if leaf.ndim == 2 else P())

    params = init_params(jax.random.PRNGKey(0))
    params = jax.device_put(params, jax.tree.map(spec, params))
    if layout == "replicated":
        opt_state = jax.jit(tx.init, out_shardings=replicated)(params)
    else:
        shapes = jax.eval_shape(tx.init, params)
        opt_state = jax.jit(tx.init, out_shardings=jax.tree.map(spec, shapes))(params)
    x = jax.device_put(jax.random.normal(jax.random.PRNGKey(1), (BATCH, WIDTH)), data)
    y = jax.device_put(jnp.tanh(x[:, ::-1]), data)
    state_sharding = jax.tree.map(lambda a: a.sharding, (params, opt_state))
    step = jax.jit(train_step, donate_argnums=(0, 1), in_shardings=(*state_sharding, data, data),
                   out_shardings=(*state_sharding, replicated))
    params, opt_state, loss = step(params, opt_state, x, y)
    loss.block_until_ready()
    with jax.profiler.trace(logdir):
        for i in range(4):
            with jax.profiler.StepTraceAnnotation("train", step_num=i):
                params, opt_state, loss = step(params, opt_state, x, y)
        loss.block_until_ready()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
