"""The same small regression loop that never syncs inside the loop: losses are kept as device
arrays and printed once after the profiled steps."""
import sys

import jax
import jax.numpy as jnp
import numpy as np

SYNC = False


@jax.jit
def step(w, x, y):
    loss, g = jax.value_and_grad(lambda w: jnp.mean((jnp.tanh(x @ w) - y) ** 2))(w)
    return w - 0.1 * g, loss


def main(logdir):
    w = jnp.full((128, 128), 0.01)
    x = jax.random.normal(jax.random.PRNGKey(0), (64, 128))
    y = jnp.sin(x)
    w, loss = step(w, x, y)
    loss.block_until_ready()
    history = []
    with jax.profiler.trace(logdir):
        for i in range(20):
            with jax.profiler.StepTraceAnnotation("step", step_num=i):
                w, loss = step(w, x, y)
                if SYNC:
                    print(f"step {i} loss {float(loss):.6f} w[0,0] {np.asarray(w)[0, 0]:.6f}")
                else:
                    history.append(loss)
        w.block_until_ready()
    if not SYNC:
        print("losses", [float(v) for v in history])


if __name__ == "__main__":
    main(sys.argv[1])
