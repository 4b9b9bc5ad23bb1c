"""A clean plain-JAX MLP + SGD loop traced WITHOUT step annotations (as many users record them):
warmed up, donated, no syncs. Nothing to report."""
import sys

import jax
import jax.numpy as jnp
import optax

tx = optax.sgd(0.01)


def train_step(params, opt_state, x, y):
    def loss_fn(p):
        return jnp.mean((jnp.tanh(x @ p["w"] + p["b"]) @ p["v"] - y) ** 2)
    loss, grads = jax.value_and_grad(loss_fn)(params)
    updates, opt_state = tx.update(grads, opt_state)
    return optax.apply_updates(params, updates), opt_state, loss


def main(logdir):
    k1, k2, k3 = jax.random.split(jax.random.PRNGKey(0), 3)
    params = {"w": jax.random.normal(k1, (128, 512)) * 0.05, "b": jnp.zeros(512),
              "v": jax.random.normal(k2, (512, 4)) * 0.05}
    opt_state = tx.init(params)
    x = jax.random.normal(k3, (256, 128))
    y = x[:, :4]
    step = jax.jit(train_step, donate_argnums=(0, 1))
    params, opt_state, loss = step(params, opt_state, x, y)
    loss.block_until_ready()
    with jax.profiler.trace(logdir):
        for _ in range(5):
            params, opt_state, loss = step(params, opt_state, x, y)
        loss.block_until_ready()


if __name__ == "__main__":
    main(sys.argv[1])
