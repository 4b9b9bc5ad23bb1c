"""DP-SGD: per-example gradients with `jax.vmap(jax.grad(...))`, each clipped to norm 1, summed and
noised, then SGD. A small MLP on batch 256: the per-example gradient tensors [256, ...] are what
this algorithm needs (not activations remat could drop, not accumulation). Donated, warm, annotated."""
import sys

import jax
import jax.numpy as jnp

CLIP, SIGMA, LR = 1.0, 0.8, 0.05


def predict(params, x):
    h = jax.nn.relu(x @ params["w1"] + params["b1"])
    return h @ params["w2"] + params["b2"]


def example_loss(params, x, y):
    return jnp.mean((predict(params, x[None]) - y) ** 2)


def private_step(params, x, y, key):
    grads = jax.vmap(jax.grad(example_loss), in_axes=(None, 0, 0))(params, x, y)
    norms = jnp.sqrt(sum(jnp.sum(g.reshape(g.shape[0], -1) ** 2, axis=1) for g in jax.tree.leaves(grads)))
    scale = jnp.minimum(1.0, CLIP / (norms + 1e-6))
    clipped = jax.tree.map(lambda g: jnp.tensordot(scale, g, axes=1), grads)
    leaves, tree = jax.tree.flatten(clipped)
    keys = jax.random.split(key, len(leaves))
    noisy = [g + SIGMA * CLIP * jax.random.normal(k, g.shape) for g, k in zip(leaves, keys)]
    noisy = jax.tree.unflatten(tree, noisy)
    new = jax.tree.map(lambda p, g: p - LR * g / x.shape[0], params, noisy)
    return new, jnp.mean((predict(params, x) - y) ** 2)


def main(logdir):
    key = jax.random.PRNGKey(5)
    k1, k2, k3 = jax.random.split(key, 3)
    params = {"w1": jax.random.normal(k1, (64, 256)) * 0.1, "b1": jnp.zeros(256),
              "w2": jax.random.normal(k2, (256, 1)) * 0.1, "b2": jnp.zeros(1)}
    x = jax.random.normal(k3, (256, 64))
    y = jnp.cos(x[:, :1])
    step = jax.jit(private_step, donate_argnums=(0,))
    params, loss = step(params, x, y, key)
    loss.block_until_ready()
    with jax.profiler.trace(logdir):
        for i in range(4):
            key, sub = jax.random.split(key)
            with jax.profiler.StepTraceAnnotation("train", step_num=i):
                params, loss = step(params, x, y, sub)
        loss.block_until_ready()


if __name__ == "__main__":
    main(sys.argv[1])
