"""The same large-state Adam MLP with the parameters and optimizer state donated
(`donate_argnums=(0, 1)`): XLA updates them in place."""
import sys

import jax
import jax.numpy as jnp
import optax

DONATE = True
tx = optax.adam(1e-3)


def loss_fn(params, x, y):
    for w in params[:-1]:
        x = jax.nn.relu(x @ w)
    return jnp.mean((x @ params[-1] - y) ** 2)


def train_step(params, opt_state, x, y):
    loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
    updates, opt_state = tx.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss


def main(logdir):
    keys = jax.random.split(jax.random.PRNGKey(0), 4)
    params = [jax.random.normal(k, (1024, 1024)) * 0.03 for k in keys[:3]]
    opt_state = tx.init(params)
    x = jax.random.normal(keys[3], (32, 1024))
    y = jnp.roll(x, 1, axis=1)
    step = jax.jit(train_step, donate_argnums=(0, 1) if DONATE else ())
    params, opt_state, loss = step(params, opt_state, x, y)
    loss.block_until_ready()
    with jax.profiler.trace(logdir):
        for i in range(3):
            with jax.profiler.StepTraceAnnotation("train", step_num=i):
                params, opt_state, loss = step(params, opt_state, x, y)
        loss.block_until_ready()


if __name__ == "__main__":
    main(sys.argv[1])
