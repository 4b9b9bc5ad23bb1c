"""Flax Linen residual MLP blocks applied in a Python loop (unrolled), 2-D activations
[batch, features] with a big batch (4096), SGD with momentum: activations dominate memory."""
import sys

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax


class Block(nn.Module):
    @nn.compact
    def __call__(self, x):
        h = nn.gelu(nn.Dense(512)(nn.LayerNorm()(x)))
        return x + nn.Dense(x.shape[-1])(h)


class Net(nn.Module):
    depth: int = 6

    @nn.compact
    def __call__(self, x):
        x = nn.Dense(128)(x)
        for _ in range(self.depth):
            x = Block()(x)
        return nn.Dense(1)(x)


def main(logdir):
    model = Net()
    x = jax.random.normal(jax.random.PRNGKey(0), (4096, 64))
    y = jnp.sin(x.sum(-1, keepdims=True))
    params = model.init(jax.random.PRNGKey(1), x)["params"]
    tx = optax.sgd(1e-2, momentum=0.9)
    opt_state = tx.init(params)

    def train_step(params, opt_state, x, y):
        loss, grads = jax.value_and_grad(lambda p: jnp.mean((model.apply({"params": p}, x) - y) ** 2))(params)
        updates, opt_state = tx.update(grads, opt_state)
        return optax.apply_updates(params, updates), opt_state, loss

    train_step = jax.jit(train_step, donate_argnums=(0, 1))
    params, opt_state, loss = train_step(params, opt_state, x, y)
    loss.block_until_ready()
    with jax.profiler.trace(logdir):
        for i in range(3):
            with jax.profiler.StepTraceAnnotation("train", step_num=i):
                params, opt_state, loss = train_step(params, opt_state, x, y)
        loss.block_until_ready()


if __name__ == "__main__":
    main(sys.argv[1])
