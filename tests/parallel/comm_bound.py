"""Communication-bound data parallelism: wide layers (8 MiB of weights) trained with SGD over
8 (simulated CPU) devices on 2 examples per device, so every step all-reduces 8 MiB of
gradients for almost no compute. Replicated state under `jax.jit` shardings, warm, 4
annotated steps."""
import sys

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

WIDTH, BATCH = 1024, 16
tx = optax.sgd(1e-2)


def loss_fn(params, x, y):
    h = jnp.tanh(x @ params["w1"])
    return jnp.mean((h @ params["w2"] - y) ** 2)


def train_step(params, opt_state, x, y):
    loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
    updates, opt_state = tx.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss


def main(logdir):
    mesh = Mesh(np.array(jax.devices()), ("data",))
    rep, data = NamedSharding(mesh, P()), NamedSharding(mesh, P("data"))
    k1, k2, k3 = jax.random.split(jax.random.PRNGKey(0), 3)
    params = jax.device_put({"w1": jax.random.normal(k1, (WIDTH, WIDTH)) / WIDTH ** 0.5,
                             "w2": jax.random.normal(k2, (WIDTH, WIDTH)) / WIDTH ** 0.5}, rep)
    opt_state = tx.init(params)
    x = jax.device_put(jax.random.normal(k3, (BATCH, WIDTH)), data)
    y = jax.device_put(jnp.tanh(x), data)
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
