"""A regression model fed precomputed features that live in a NumPy array on the host: each
step hands the jitted function a fresh 16 MiB float32 slice (4096 x 1024), so JAX copies it to
the device every step. Adam, donated state, warm, annotated, not blocked per step (async dispatch)."""
import sys

import jax
import jax.numpy as jnp
import numpy as np
import optax

tx = optax.adam(1e-3)


def loss_fn(params, feats, target):
    h = jnp.tanh(feats @ params["w"] + params["b"])
    return jnp.mean((h @ params["v"] - target) ** 2)


@jax.jit
def update(params, opt_state, feats, target):
    loss, grads = jax.value_and_grad(loss_fn)(params, feats, target)
    updates, opt_state = tx.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss


def main(logdir):
    gen = np.random.default_rng(7)
    features = gen.standard_normal((5, 4096, 1024), dtype=np.float32)     # 80 MiB of host features
    targets = gen.standard_normal((5, 4096, 1), dtype=np.float32)
    key = jax.random.PRNGKey(3)
    params = {"w": jax.random.normal(key, (1024, 256)) * 0.02, "b": jnp.zeros(256),
              "v": jax.random.normal(key, (256, 1)) * 0.05}
    opt_state = tx.init(params)
    params, opt_state, loss = update(params, opt_state, features[0], targets[0])
    loss.block_until_ready()
    with jax.profiler.trace(logdir):
        for i in range(4):
            with jax.profiler.StepTraceAnnotation("train", step_num=i):
                params, opt_state, loss = update(params, opt_state, features[i + 1], targets[i + 1])
        loss.block_until_ready()


if __name__ == "__main__":
    main(sys.argv[1])
