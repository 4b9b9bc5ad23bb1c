"""Flax NNX: a deep MLP whose blocks are a list of modules (`self.blocks = nnx.List([Block(...) ...])`),
applied in a loop, batch 4096, width 256, hidden 1024, nnx.Optimizer(Adam), nnx.jit, warm,
annotated. The saved activations of the 8 blocks are most of the step's memory."""
import sys

import jax
import jax.numpy as jnp
import optax
from flax import nnx

DEPTH, WIDTH, HIDDEN, BATCH = 8, 256, 1024, 4096


class Block(nnx.Module):
    def __init__(self, rngs):
        self.norm = nnx.LayerNorm(WIDTH, rngs=rngs)
        self.up = nnx.Linear(WIDTH, HIDDEN, rngs=rngs)
        self.down = nnx.Linear(HIDDEN, WIDTH, rngs=rngs)

    def __call__(self, x):
        return x + self.down(nnx.relu(self.up(self.norm(x))))


class DeepMLP(nnx.Module):
    def __init__(self, rngs):
        self.embed = nnx.Linear(32, WIDTH, rngs=rngs)
        self.blocks = nnx.List([Block(rngs) for _ in range(DEPTH)])
        self.head = nnx.Linear(WIDTH, 1, rngs=rngs)

    def __call__(self, x):
        x = self.embed(x)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


@nnx.jit
def train_step(model, optimizer, x, y):
    loss, grads = nnx.value_and_grad(lambda m: jnp.mean((m(x) - y) ** 2))(model)
    optimizer.update(model, grads)
    return loss


def main(logdir):
    model = DeepMLP(nnx.Rngs(0))
    optimizer = nnx.Optimizer(model, optax.adam(1e-3), wrt=nnx.Param)
    x = jax.random.normal(jax.random.PRNGKey(1), (BATCH, 32))
    y = jnp.tanh(x[:, :1])
    train_step(model, optimizer, x, y).block_until_ready()
    with jax.profiler.trace(logdir):
        for i in range(3):
            with jax.profiler.StepTraceAnnotation("train", step_num=i):
                loss = train_step(model, optimizer, x, y)
        loss.block_until_ready()


if __name__ == "__main__":
    main(sys.argv[1])
