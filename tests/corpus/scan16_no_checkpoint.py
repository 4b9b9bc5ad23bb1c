"""Plain JAX: 16 stacked residual MLP layers applied with `lax.scan`, no checkpointing, Adam.
Every layer's activations are stacked for the backward pass: a large share of peak memory."""
import sys

import jax
import jax.numpy as jnp
import optax

LAYERS, WIDTH, HIDDEN, BATCH = 16, 256, 1024, 512
CHECKPOINT = False
tx = optax.adam(1e-3)


def layer(h, w):
    y = jnp.tanh(h @ w["up"])
    return h + y @ w["down"], None


def loss_fn(params, x):
    body = jax.checkpoint(layer) if CHECKPOINT else layer
    h, _ = jax.lax.scan(body, x, params)
    return jnp.mean(h ** 2)


def train_step(params, opt_state, x):
    loss, grads = jax.value_and_grad(loss_fn)(params, x)
    updates, opt_state = tx.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss


def main(logdir):
    k1, k2, k3 = jax.random.split(jax.random.PRNGKey(0), 3)
    params = {"up": jax.random.normal(k1, (LAYERS, WIDTH, HIDDEN)) * 0.02,
              "down": jax.random.normal(k2, (LAYERS, HIDDEN, WIDTH)) * 0.02}
    opt_state = tx.init(params)
    x = jax.random.normal(k3, (BATCH, WIDTH))
    step = jax.jit(train_step, donate_argnums=(0, 1))
    params, opt_state, loss = step(params, opt_state, x)
    loss.block_until_ready()
    with jax.profiler.trace(logdir):
        for i in range(3):
            with jax.profiler.StepTraceAnnotation("train", step_num=i):
                params, opt_state, loss = step(params, opt_state, x)
        loss.block_until_ready()


if __name__ == "__main__":
    main(sys.argv[1])
