"""Gradient accumulation the optax way: `optax.MultiSteps(adam, every_k_schedule=4)` around a small
MLP, one jitted call per mini-batch of 256 (the optimizer applies the update every 4th call and
keeps a gradient-sized accumulator in its state). The whole batch of 1024 would fit easily:
accumulation buys nothing here. Donated, warm, annotated."""
import sys

import jax
import jax.numpy as jnp
import optax

ACCUM = 4
opt = optax.MultiSteps(optax.adam(1e-3), every_k_schedule=ACCUM)


def loss_fn(params, x, y):
    h = jax.nn.gelu(x @ params["w1"])
    h = jax.nn.gelu(h @ params["w2"])
    return jnp.mean((h @ params["w3"] - y) ** 2)


def train_step(params, opt_state, x, y):
    loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
    updates, opt_state = opt.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss


def main(logdir):
    k1, k2, k3, k4 = jax.random.split(jax.random.PRNGKey(11), 4)
    params = {"w1": jax.random.normal(k1, (128, 1024)) * 0.05, "w2": jax.random.normal(k2, (1024, 1024)) * 0.03,
              "w3": jax.random.normal(k3, (1024, 1)) * 0.03}
    opt_state = opt.init(params)
    xs = jax.random.normal(k4, (ACCUM, 256, 128))
    ys = jnp.sin(xs.sum(-1, keepdims=True))
    step = jax.jit(train_step, donate_argnums=(0, 1))
    for j in range(ACCUM):                       # warm: one full accumulation cycle
        params, opt_state, loss = step(params, opt_state, xs[j], ys[j])
    jax.block_until_ready(loss)
    with jax.profiler.trace(logdir):
        for i in range(2 * ACCUM):
            with jax.profiler.StepTraceAnnotation("train", step_num=i):
                params, opt_state, loss = step(params, opt_state, xs[i % ACCUM], ys[i % ACCUM])
        jax.block_until_ready(loss)


if __name__ == "__main__":
    main(sys.argv[1])
