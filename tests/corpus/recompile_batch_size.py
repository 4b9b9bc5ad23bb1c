"""A plain JAX MLP whose batch size changes every step (a loader that yields ragged batches):
the jitted train step is compiled again on every step. Warm-up first, then annotated steps."""
import sys

import jax
import jax.numpy as jnp
import optax

tx = optax.sgd(0.01, momentum=0.9)


def loss_fn(params, x, y):
    h = jnp.tanh(x @ params["w1"])
    return jnp.mean((h @ params["w2"] - y) ** 2)


@jax.jit
def train_step(params, opt_state, x, y):
    loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
    updates, opt_state = tx.update(grads, opt_state)
    return optax.apply_updates(params, updates), opt_state, loss


def main(logdir):
    k1, k2, k3 = jax.random.split(jax.random.PRNGKey(0), 3)
    params = {"w1": jax.random.normal(k1, (128, 512)) * 0.05, "w2": jax.random.normal(k2, (512, 1)) * 0.05}
    opt_state = tx.init(params)
    data = jax.random.normal(k3, (4096, 128))
    target = jnp.sum(data, axis=1, keepdims=True)
    params, opt_state, loss = train_step(params, opt_state, data[:1024], target[:1024])
    loss.block_until_ready()
    with jax.profiler.trace(logdir):
        for step in range(4):
            with jax.profiler.StepTraceAnnotation("train", step_num=step):
                n = 1024 + 256 * (step + 1)            # a different batch size every step
                params, opt_state, loss = train_step(params, opt_state, data[:n], target[:n])
        loss.block_until_ready()


if __name__ == "__main__":
    main(sys.argv[1])
