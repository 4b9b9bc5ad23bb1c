"""Flax Linen CNN with Adam, profiled the way the JAX docs show: the trace starts before the
first call (init and the first compile are inside it), no step annotations, no sync in the loop."""
import sys

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax


class CNN(nn.Module):
    @nn.compact
    def __call__(self, x):
        x = nn.relu(nn.Conv(16, (3, 3))(x))
        x = nn.avg_pool(x, (2, 2), (2, 2))
        x = nn.relu(nn.Conv(32, (3, 3))(x))
        x = nn.avg_pool(x, (2, 2), (2, 2))
        x = x.reshape((x.shape[0], -1))
        x = nn.relu(nn.Dense(128)(x))
        return nn.Dense(10)(x)


def main(logdir):
    with jax.profiler.trace(logdir):
        model = CNN()
        x = jax.random.normal(jax.random.PRNGKey(0), (64, 28, 28, 1))
        y = jax.random.randint(jax.random.PRNGKey(1), (64,), 0, 10)
        params = model.init(jax.random.PRNGKey(2), x)["params"]
        tx = optax.adam(1e-3)
        opt_state = tx.init(params)

        @jax.jit
        def train_step(params, opt_state, x, y):
            def loss_fn(p):
                logits = model.apply({"params": p}, x)
                return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()
            loss, grads = jax.value_and_grad(loss_fn)(params)
            updates, opt_state = tx.update(grads, opt_state, params)
            return optax.apply_updates(params, updates), opt_state, loss

        for step in range(5):
            params, opt_state, loss = train_step(params, opt_state, x, y)
        loss.block_until_ready()


if __name__ == "__main__":
    main(sys.argv[1])
