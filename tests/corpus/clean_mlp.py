"""A well-written small plain-JAX MLP classifier: jitted, state donated, warmed up before the
trace, annotated steps, no syncs, data already on the device. Nothing to report."""
import sys

import jax
import jax.numpy as jnp
import optax

tx = optax.adamw(1e-3, weight_decay=1e-4)


def predict(params, x):
    for w, b in params[:-1]:
        x = jax.nn.gelu(x @ w + b)
    w, b = params[-1]
    return x @ w + b


def train_step(params, opt_state, x, y):
    def loss_fn(p):
        return optax.softmax_cross_entropy_with_integer_labels(predict(p, x), y).mean()
    loss, grads = jax.value_and_grad(loss_fn)(params)
    updates, opt_state = tx.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss


def main(logdir):
    sizes = [784, 512, 512, 10]
    keys = jax.random.split(jax.random.PRNGKey(0), len(sizes) + 1)
    params = [(jax.random.normal(k, (a, b)) * a ** -0.5, jnp.zeros(b)) for k, a, b in zip(keys, sizes[:-1], sizes[1:])]
    opt_state = tx.init(params)
    x = jax.random.normal(keys[-1], (64, 784))
    y = jnp.arange(64) % 10
    step = jax.jit(train_step, donate_argnums=(0, 1))
    params, opt_state, loss = step(params, opt_state, x, y)
    loss.block_until_ready()
    with jax.profiler.trace(logdir):
        for i in range(4):
            with jax.profiler.StepTraceAnnotation("train", step_num=i):
                params, opt_state, loss = step(params, opt_state, x, y)
        loss.block_until_ready()


if __name__ == "__main__":
    main(sys.argv[1])
