"""The same sharded-jit data-parallel MLP on 8 devices, traced from the first call (placement,
init and compile inside the trace), no step annotations."""
import sys

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

FIRST_CALL = True
tx = optax.sgd(0.05)


def loss_fn(params, x, y):
    h = jax.nn.relu(x @ params["w1"] + params["b1"])
    return jnp.mean((h @ params["w2"] - y) ** 2)


def train_step(params, opt_state, x, y):
    loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
    updates, opt_state = tx.update(grads, opt_state)
    return optax.apply_updates(params, updates), opt_state, loss


def setup():
    mesh = Mesh(np.array(jax.devices()), ("data",))
    rep, data = NamedSharding(mesh, P()), NamedSharding(mesh, P("data"))
    k1, k2, k3 = jax.random.split(jax.random.PRNGKey(0), 3)
    params = jax.device_put({"w1": jax.random.normal(k1, (64, 256)) * 0.1, "b1": jnp.zeros(256),
                             "w2": jax.random.normal(k2, (256, 1)) * 0.1}, rep)
    opt_state = tx.init(params)
    x = jax.device_put(jax.random.normal(k3, (512, 64)), data)
    y = jax.device_put(jnp.sum(x, axis=1, keepdims=True), data)
    step = jax.jit(train_step, donate_argnums=(0, 1))
    return step, params, opt_state, x, y


def main(logdir):
    if FIRST_CALL:
        with jax.profiler.trace(logdir):
            step, params, opt_state, x, y = setup()
            for _ in range(5):
                params, opt_state, loss = step(params, opt_state, x, y)
            loss.block_until_ready()
        return
    step, params, opt_state, x, y = setup()
    params, opt_state, loss = step(params, opt_state, x, y)
    loss.block_until_ready()
    with jax.profiler.trace(logdir):
        for i in range(4):
            with jax.profiler.StepTraceAnnotation("train", step_num=i):
                params, opt_state, loss = step(params, opt_state, x, y)
        loss.block_until_ready()


if __name__ == "__main__":
    main(sys.argv[1])
