"""Part 3.2-style looping pipeline: `shard_map` over a data=2 x pipe=4 mesh of 8 simulated CPU
devices; each device holds L = 2 stage layers (round-robin: layer l*S + s on stage s), the batch is
cut into M = 4 microbatches, and a `fori_loop` of L*M + S - 1 = 11 iterations runs them breadth
first with a `ppermute` ring that also carries stage S-1's output back to stage 0 for the next loop.
Gradients `pmean` over data, Adam, donated, warm, annotated. Bubble on paper: 3/11."""
import sys
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

MICROBATCHES, STAGES, DATA, LOOPS = 4, 4, 2, 2
D, BATCH = 256, 64
tx = optax.adam(1e-3)
mesh = Mesh(np.array(jax.devices()).reshape(DATA, STAGES), ("data", "pipe"))


def stage(w, x):
    h = jax.nn.gelu(x @ w["w1"])
    return x + h @ w["w2"]


def pipeline(w, x):
    w = jax.tree.map(lambda a: a[0], w)           # this device's LOOPS layers
    index = jax.lax.axis_index("pipe")
    micro = x.reshape(MICROBATCHES, -1, D)
    ring = [(i, (i + 1) % STAGES) for i in range(STAGES)]

    def body(i, carry):
        state, out = carry
        k = i - index                                 # this stage's work item: loop k // M, microbatch k % M
        loop = jnp.clip(k // MICROBATCHES, 0, LOOPS - 1)
        state = jnp.where((index == 0) & (k < MICROBATCHES), micro[i % MICROBATCHES], state)
        state = stage(jax.tree.map(lambda a: a[loop], w), state)
        done = k % MICROBATCHES
        last = (index == STAGES - 1) & (k >= (LOOPS - 1) * MICROBATCHES) & (k < LOOPS * MICROBATCHES)
        out = out.at[done].set(jnp.where(last, state, out[done]))
        return jax.lax.ppermute(state, "pipe", ring), out

    init = (jnp.zeros_like(micro[0]), jnp.zeros_like(micro))
    _, out = jax.lax.fori_loop(0, LOOPS * MICROBATCHES + STAGES - 1, body, init)
    return out.reshape(x.shape)


def loss_fn(w, x, y):
    out = pipeline(w, x)
    last = jax.lax.axis_index("pipe") == STAGES - 1
    return jnp.where(last, jnp.mean((out - y) ** 2), 0.0)


def local_step(w, opt_state, x, y):
    loss, grads = jax.value_and_grad(loss_fn)(w, x, y)
    grads = jax.lax.pmean(grads, "data")
    updates, opt_state = tx.update(grads, opt_state, w)
    return optax.apply_updates(w, updates), opt_state, jax.lax.psum(jax.lax.pmean(loss, "data"), "pipe")


def setup():
    k1, k2, k3 = jax.random.split(jax.random.PRNGKey(0), 3)
    shape = (STAGES, LOOPS, D, D)
    w = {"w1": jax.random.normal(k1, shape) / D ** 0.5, "w2": jax.random.normal(k2, shape) / D ** 0.5}
    w = jax.device_put(w, NamedSharding(mesh, P("pipe")))
    opt_state = tx.init(w)
    specs = jax.tree.map(lambda a: P("pipe") if a.ndim == 4 else P(), opt_state)
    x = jax.device_put(jax.random.normal(k3, (BATCH, D)), NamedSharding(mesh, P("data")))
    y = jnp.tanh(x)
    step = jax.jit(jax.shard_map(local_step, mesh=mesh, in_specs=(P("pipe"), specs, P("data"), P("data")),
                                 out_specs=(P("pipe"), specs, P()), check_vma=False), donate_argnums=(0, 1))
    return step, w, opt_state, x, y


def main(logdir):
    step, w, opt_state, x, y = setup()
    w, opt_state, loss = step(w, opt_state, x, y)
    loss.block_until_ready()
    with jax.profiler.trace(logdir):
        for i in range(4):
            with jax.profiler.StepTraceAnnotation("train", step_num=i):
                w, opt_state, loss = step(w, opt_state, x, y)
        loss.block_until_ready()


if __name__ == "__main__":
    main(sys.argv[1])
