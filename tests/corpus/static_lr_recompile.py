"""A plain JAX step that takes the learning rate as a static argument, decayed in Python every
step: each new float value compiles the step again (warm, annotated)."""
import functools
import sys

import jax
import jax.numpy as jnp


@functools.partial(jax.jit, static_argnums=(2,))
def sgd_step(w, batch, lr):
    x, y = batch
    loss, g = jax.value_and_grad(lambda w: jnp.mean((x @ w - y) ** 2))(w)
    return w - lr * g, loss


def main(logdir):
    k1, k2 = jax.random.split(jax.random.PRNGKey(0))
    x = jax.random.normal(k1, (1024, 256))
    y = x @ jax.random.normal(k2, (256, 8))
    w = jnp.zeros((256, 8))
    lr = 0.1
    w, loss = sgd_step(w, (x, y), lr)
    loss.block_until_ready()
    with jax.profiler.trace(logdir):
        for i in range(4):
            with jax.profiler.StepTraceAnnotation("train", step_num=i):
                lr = lr * 0.9                      # a new static value: a new compile
                w, loss = sgd_step(w, (x, y), lr)
        loss.block_until_ready()


if __name__ == "__main__":
    main(sys.argv[1])
