"""Data-parallel MLP with `jax.pmap` over 8 (simulated CPU) devices, Adam via optax inside the
pmapped step, the batch placed on the devices once, warmed up, annotated steps. Clean."""
import functools
import sys

import jax
import jax.numpy as jnp
import optax

tx = optax.adam(1e-3)


def loss_fn(params, x, y):
    h = jnp.tanh(x @ params["w1"])
    return jnp.mean((h @ params["w2"] - y) ** 2)


@functools.partial(jax.pmap, axis_name="devices", donate_argnums=(0, 1))
def train_step(params, opt_state, x, y):
    loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
    grads = jax.lax.pmean(grads, "devices")
    updates, opt_state = tx.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, jax.lax.pmean(loss, "devices")


def main(logdir):
    n = jax.local_device_count()
    k1, k2, k3 = jax.random.split(jax.random.PRNGKey(0), 3)
    params = {"w1": jax.random.normal(k1, (32, 128)) * 0.1, "w2": jax.random.normal(k2, (128, 1)) * 0.1}
    opt_state = tx.init(params)
    params, opt_state = jax.tree_util.tree_map(lambda a: jnp.broadcast_to(a, (n, *a.shape)), (params, opt_state))
    per_device = jax.sharding.NamedSharding(jax.sharding.Mesh(jax.local_devices(), ("devices",)),
                                            jax.sharding.PartitionSpec("devices"))
    x = jax.device_put(jax.random.normal(k3, (n, 64, 32)), per_device)      # the batch lives sharded
    y = jax.pmap(lambda a: jnp.sum(a, axis=-1, keepdims=True))(x)
    params, opt_state, loss = train_step(params, opt_state, x, y)
    loss.block_until_ready()
    with jax.profiler.trace(logdir):
        for i in range(4):
            with jax.profiler.StepTraceAnnotation("train", step_num=i):
                params, opt_state, loss = train_step(params, opt_state, x, y)
        loss.block_until_ready()


if __name__ == "__main__":
    main(sys.argv[1])
