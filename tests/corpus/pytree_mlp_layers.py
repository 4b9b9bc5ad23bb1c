"""Equinox-style plain JAX: the model is a pytree (a list of per-layer dicts of arrays), the forward
pass a Python loop over it, no Flax. 8 residual MLP layers, batch 4096, width 256, hidden 1024,
optax Adam, donated, warm, annotated: the saved activations are most of the step's memory."""
import sys

import jax
import jax.numpy as jnp
import optax

DEPTH, WIDTH, HIDDEN, BATCH = 8, 256, 1024, 4096
tx = optax.adam(1e-3)


def init(key):
    layers = []
    for k in jax.random.split(key, DEPTH):
        a, b = jax.random.split(k)
        layers.append({"up": jax.random.normal(a, (WIDTH, HIDDEN)) / WIDTH ** 0.5,
                       "down": jax.random.normal(b, (HIDDEN, WIDTH)) / HIDDEN ** 0.5})
    return layers


def forward(layers, x):
    for layer in layers:
        x = x + jax.nn.gelu(x @ layer["up"]) @ layer["down"]
    return x


def train_step(layers, opt_state, x, y):
    loss, grads = jax.value_and_grad(lambda p: jnp.mean((forward(p, x) - y) ** 2))(layers)
    updates, opt_state = tx.update(grads, opt_state, layers)
    return optax.apply_updates(layers, updates), opt_state, loss


def main(logdir):
    layers = init(jax.random.PRNGKey(0))
    opt_state = tx.init(layers)
    x = jax.random.normal(jax.random.PRNGKey(1), (BATCH, WIDTH))
    y = jnp.roll(x, 1, axis=-1)
    step = jax.jit(train_step, donate_argnums=(0, 1))
    layers, opt_state, loss = step(layers, opt_state, x, y)
    loss.block_until_ready()
    with jax.profiler.trace(logdir):
        for i in range(3):
            with jax.profiler.StepTraceAnnotation("train", step_num=i):
                layers, opt_state, loss = step(layers, opt_state, x, y)
        loss.block_until_ready()


if __name__ == "__main__":
    main(sys.argv[1])
