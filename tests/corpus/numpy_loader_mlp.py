"""An MNIST-style loop: a NumPy dataset sliced into small batches on the host and passed to the
jitted step every iteration (the usual data-loader pattern), Adam, donated, warm, annotated.
The per-step copies are small (128 x 784 float32, 392 KiB) next to the step's compute."""
import sys

import jax
import jax.numpy as jnp
import numpy as np
import optax

tx = optax.adam(1e-3)


def train_step(params, opt_state, x, y):
    def loss_fn(p):
        h = jax.nn.relu(x @ p["w1"])
        h = jax.nn.relu(h @ p["w2"])
        return optax.softmax_cross_entropy_with_integer_labels(h @ p["w3"], y).mean()
    loss, grads = jax.value_and_grad(loss_fn)(params)
    updates, opt_state = tx.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss


def main(logdir):
    rng = np.random.default_rng(0)
    images = rng.standard_normal((1024, 784), dtype=np.float32)
    labels = rng.integers(0, 10, 1024)
    keys = jax.random.split(jax.random.PRNGKey(0), 3)
    params = {"w1": jax.random.normal(keys[0], (784, 1024)) * 0.03, "w2": jax.random.normal(keys[1], (1024, 1024)) * 0.03,
              "w3": jax.random.normal(keys[2], (1024, 10)) * 0.03}
    opt_state = tx.init(params)
    step = jax.jit(train_step, donate_argnums=(0, 1))
    params, opt_state, loss = step(params, opt_state, images[:128], labels[:128])
    loss.block_until_ready()
    with jax.profiler.trace(logdir):
        for i in range(4):
            with jax.profiler.StepTraceAnnotation("train", step_num=i):
                lo = 128 * (i + 1)
                params, opt_state, loss = step(params, opt_state, images[lo:lo + 128], labels[lo:lo + 128])
        loss.block_until_ready()


if __name__ == "__main__":
    main(sys.argv[1])
