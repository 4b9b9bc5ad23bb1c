"""A wide MLP of 8 residual blocks, Flax Linen with its default module names (Block_0 ... Block_7),
unrolled by a Python loop, batch 4096, Adam, donated, warm, annotated: the activations every block
saves for the backward pass are most of the step's memory."""
import sys

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax

BATCH, WIDTH, HIDDEN, DEPTH = 4096, 256, 1024, 8


class Block(nn.Module):
    @nn.compact
    def __call__(self, x):
        h = nn.Dense(HIDDEN)(nn.LayerNorm()(x))
        return x + nn.Dense(WIDTH)(nn.relu(h))


class WideMLP(nn.Module):
    @nn.compact
    def __call__(self, x):
        x = nn.Dense(WIDTH)(x)
        for _ in range(DEPTH):
            x = Block()(x)
        return nn.Dense(10)(x)


def main(logdir):
    model = WideMLP()
    rng = jax.random.PRNGKey(0)
    x = jax.random.normal(rng, (BATCH, 32))
    labels = jax.random.randint(rng, (BATCH,), 0, 10)
    params = model.init(rng, x)["params"]
    tx = optax.adam(3e-4)
    opt_state = tx.init(params)

    @jax.jit
    def loss_fn(params, x, labels):
        logits = model.apply({"params": params}, x)
        return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()

    def train_step(params, opt_state, x, labels):
        loss, grads = jax.value_and_grad(loss_fn)(params, x, labels)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    step = jax.jit(train_step, donate_argnums=(0, 1))
    params, opt_state, loss = step(params, opt_state, x, labels)
    jax.block_until_ready(loss)
    with jax.profiler.trace(logdir):
        for i in range(3):
            with jax.profiler.StepTraceAnnotation("train", step_num=i):
                params, opt_state, loss = step(params, opt_state, x, labels)
        jax.block_until_ready(loss)


if __name__ == "__main__":
    main(sys.argv[1])
