"""Flax NNX MLP with `nnx.Optimizer` (AdamW) and `nnx.jit`, batch 4096, warmed up, annotated steps.
The step is large enough that nnx.jit's per-call Python overhead is a small share of it. Clean."""
import sys

import jax
import jax.numpy as jnp
import optax
from flax import nnx


class MLP(nnx.Module):
    def __init__(self, rngs):
        self.l1 = nnx.Linear(32, 512, rngs=rngs)
        self.l2 = nnx.Linear(512, 512, rngs=rngs)
        self.out = nnx.Linear(512, 1, rngs=rngs)

    def __call__(self, x):
        return self.out(nnx.relu(self.l2(nnx.relu(self.l1(x)))))


@nnx.jit
def train_step(model, optimizer, x, y):
    loss, grads = nnx.value_and_grad(lambda m: jnp.mean((m(x) - y) ** 2))(model)
    optimizer.update(model, grads)
    return loss


def main(logdir):
    model = MLP(nnx.Rngs(0))
    optimizer = nnx.Optimizer(model, optax.adamw(1e-3), wrt=nnx.Param)
    x = jax.random.normal(jax.random.PRNGKey(1), (4096, 32))
    y = jnp.sum(x ** 2, axis=-1, keepdims=True)
    train_step(model, optimizer, x, y).block_until_ready()
    with jax.profiler.trace(logdir):
        for i in range(4):
            with jax.profiler.StepTraceAnnotation("train", step_num=i):
                loss = train_step(model, optimizer, x, y)
        loss.block_until_ready()


if __name__ == "__main__":
    main(sys.argv[1])
