"""Flax NNX CNN + SGD, traced from the first call (model construction and compile inside the
trace), no step annotations, no sync in the loop."""
import sys

import jax
import jax.numpy as jnp
import optax
from flax import nnx


class CNN(nnx.Module):
    def __init__(self, rngs):
        self.c1 = nnx.Conv(1, 16, (3, 3), rngs=rngs)
        self.c2 = nnx.Conv(16, 32, (3, 3), rngs=rngs)
        self.fc = nnx.Linear(7 * 7 * 32, 10, rngs=rngs)

    def __call__(self, x):
        x = nnx.avg_pool(nnx.relu(self.c1(x)), (2, 2), (2, 2))
        x = nnx.avg_pool(nnx.relu(self.c2(x)), (2, 2), (2, 2))
        return self.fc(x.reshape(x.shape[0], -1))


@nnx.jit
def train_step(model, optimizer, x, y):
    def loss_fn(m):
        return optax.softmax_cross_entropy_with_integer_labels(m(x), y).mean()
    loss, grads = nnx.value_and_grad(loss_fn)(model)
    optimizer.update(model, grads)
    return loss


def main(logdir):
    with jax.profiler.trace(logdir):
        model = CNN(nnx.Rngs(0))
        optimizer = nnx.Optimizer(model, optax.sgd(0.05), wrt=nnx.Param)
        x = jax.random.normal(jax.random.PRNGKey(1), (64, 28, 28, 1))
        y = jax.random.randint(jax.random.PRNGKey(2), (64,), 0, 10)
        for _ in range(5):
            loss = train_step(model, optimizer, x, y)
        loss.block_until_ready()


if __name__ == "__main__":
    main(sys.argv[1])
