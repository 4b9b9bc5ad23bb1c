"""Plain JAX GRU-style RNN over 32 time steps with `lax.scan`, Adam, donated, warm, annotated.
A small recurrent model: the per-time-step states stacked for backprop are small."""
import sys

import jax
import jax.numpy as jnp
import optax

IN, HID, T, BATCH = 16, 128, 32, 64
tx = optax.adam(1e-3)


def cell(p, h, x):
    z = jax.nn.sigmoid(x @ p["wz"] + h @ p["uz"])
    r = jax.nn.sigmoid(x @ p["wr"] + h @ p["ur"])
    c = jnp.tanh(x @ p["wc"] + (r * h) @ p["uc"])
    return (1 - z) * h + z * c


def loss_fn(p, xs, y):
    h, _ = jax.lax.scan(lambda h, x: (cell(p, h, x), None), jnp.zeros((xs.shape[1], HID)), xs)
    return jnp.mean((h @ p["out"] - y) ** 2)


def train_step(p, opt_state, xs, y):
    loss, g = jax.value_and_grad(loss_fn)(p, xs, y)
    updates, opt_state = tx.update(g, opt_state, p)
    return optax.apply_updates(p, updates), opt_state, loss


def main(logdir):
    keys = iter(jax.random.split(jax.random.PRNGKey(0), 10))
    p = {k: jax.random.normal(next(keys), (IN, HID)) * 0.1 for k in ("wz", "wr", "wc")}
    p |= {k: jax.random.normal(next(keys), (HID, HID)) * 0.05 for k in ("uz", "ur", "uc")}
    p["out"] = jax.random.normal(next(keys), (HID, 1)) * 0.1
    opt_state = tx.init(p)
    xs = jax.random.normal(next(keys), (T, BATCH, IN))
    y = jnp.mean(xs[:, :, :1], axis=0)
    step = jax.jit(train_step, donate_argnums=(0, 1))
    p, opt_state, loss = step(p, opt_state, xs, y)
    loss.block_until_ready()
    with jax.profiler.trace(logdir):
        for i in range(4):
            with jax.profiler.StepTraceAnnotation("train", step_num=i):
                p, opt_state, loss = step(p, opt_state, xs, y)
        loss.block_until_ready()


if __name__ == "__main__":
    main(sys.argv[1])
