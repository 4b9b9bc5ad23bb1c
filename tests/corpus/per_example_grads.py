"""DP-SGD-style per-example gradients: `jax.vmap(jax.grad(...))` over a batch of 64 on an MLP
with two 256x256 layers, each example's gradient clipped to norm 1 before the mean; SGD,
donated, warm, annotated. The [64, 256, 256] per-example gradients are the bulk of memory:
gradients, not activations."""
import sys

import jax
import jax.numpy as jnp
import optax

D, BATCH = 256, 64
tx = optax.sgd(0.05)


def loss_fn(params, x, y):
    h = jnp.tanh(x @ params["w1"])
    return jnp.mean((h @ params["w2"] - y) ** 2)


def clipped(g):
    norm = jnp.sqrt(sum(jnp.sum(v ** 2) for v in jax.tree.leaves(g)))
    return jax.tree.map(lambda v: v / jnp.maximum(1.0, norm), g)


def train_step(params, opt_state, x, y):
    per_example = jax.vmap(jax.grad(loss_fn), in_axes=(None, 0, 0))(params, x, y)
    grads = jax.tree.map(lambda g: jnp.mean(g, axis=0), jax.vmap(clipped)(per_example))
    updates, opt_state = tx.update(grads, opt_state)
    return optax.apply_updates(params, updates), opt_state, loss_fn(params, x, y)


def main(logdir):
    k1, k2, k3 = jax.random.split(jax.random.PRNGKey(0), 3)
    params = {"w1": jax.random.normal(k1, (D, D)) / D ** 0.5, "w2": jax.random.normal(k2, (D, D)) / D ** 0.5}
    opt_state = tx.init(params)
    x = jax.random.normal(k3, (BATCH, D))
    y = jnp.tanh(x)
    step = jax.jit(train_step, donate_argnums=(0, 1))
    params, opt_state, loss = step(params, opt_state, x, y)
    loss.block_until_ready()
    with jax.profiler.trace(logdir):
        for i in range(4):
            with jax.profiler.StepTraceAnnotation("train", step_num=i):
                params, opt_state, loss = step(params, opt_state, x, y)
        loss.block_until_ready()


if __name__ == "__main__":
    main(sys.argv[1])
