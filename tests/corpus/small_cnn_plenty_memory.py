"""A small Flax Linen CNN (CIFAR-sized inputs) with SGD, warmed up and annotated, state donated:
its activations are most of a small peak, but memory is plentiful, so remat buys nothing needed."""
import sys

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax


class SmallCNN(nn.Module):
    @nn.compact
    def __call__(self, x):
        for feats in (32, 64):
            x = nn.relu(nn.Conv(feats, (3, 3))(x))
            x = nn.max_pool(x, (2, 2), (2, 2))
        x = x.mean(axis=(1, 2))
        return nn.Dense(10)(x)


def main(logdir):
    model = SmallCNN()
    x = jax.random.normal(jax.random.PRNGKey(0), (128, 32, 32, 3))
    y = jax.random.randint(jax.random.PRNGKey(1), (128,), 0, 10)
    params = model.init(jax.random.PRNGKey(2), x)["params"]
    tx = optax.sgd(0.1, momentum=0.9)
    opt_state = tx.init(params)

    def train_step(params, opt_state, x, y):
        def loss_fn(p):
            return optax.softmax_cross_entropy_with_integer_labels(model.apply({"params": p}, x), y).mean()
        loss, grads = jax.value_and_grad(loss_fn)(params)
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
