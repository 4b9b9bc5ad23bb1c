"""Part 5-style 3D parallelism with FSDP over data: `shard_map` over a data=2 x pipe=2 x tensor=2 mesh of 8 simulated
CPU devices. Two pipeline stages of two tensor-parallel MLP blocks each (all-gather in,
`psum_scatter` out over `tensor`), 4 microbatches through a `fori_loop` of M + S - 1 = 5
iterations with a `ppermute` ring over `pipe`; parameters and Adam state split over pipe and
tensor and, FSDP-style, over data too: each step all-gathers the weights over data before the
pipeline and reduce-scatters their gradients (the gather's transpose); donated, warm, annotated.
Bubble on paper: 1/5."""
import sys

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

DATA, STAGES, TENSOR, BLOCKS, MICROBATCHES = 2, 2, 2, 2, 4
D, HIDDEN, BATCH = 512, 2048, 32
FSDP = True
tx = optax.adam(1e-3)
mesh = Mesh(np.array(jax.devices()).reshape(DATA, STAGES, TENSOR), ("data", "pipe", "tensor"))
WSPEC = {"w1": P("pipe", None, "data" if FSDP else None, "tensor"), "w2": P("pipe", None, "tensor", "data" if FSDP else None)}


def block(w1, w2, x):
    full = jax.lax.all_gather(x, "tensor", axis=1, tiled=True)
    h = jax.nn.gelu(full @ w1)
    return x + jax.lax.psum_scatter(h @ w2, "tensor", scatter_dimension=1, tiled=True)


def stage(w, x):
    for b in range(BLOCKS):
        x = block(w["w1"][b], w["w2"][b], x)
    return x


def pipeline(w, x):
    w = jax.tree.map(lambda a: a[0], w)
    index = jax.lax.axis_index("pipe")
    micro = x.reshape(MICROBATCHES, -1, x.shape[-1])
    ring = [(i, (i + 1) % STAGES) for i in range(STAGES)]

    def body(i, carry):
        state, out = carry
        state = jnp.where(index == 0, micro[i % MICROBATCHES], state)
        state = stage(w, state)
        done = (i - (STAGES - 1)) % MICROBATCHES
        out = out.at[done].set(jnp.where(i >= STAGES - 1, state, out[done]))
        return jax.lax.ppermute(state, "pipe", ring), out

    _, out = jax.lax.fori_loop(0, MICROBATCHES + STAGES - 1, body, (jnp.zeros_like(micro[0]), jnp.zeros_like(micro)))
    return out.reshape(x.shape)


def loss_fn(w, x, y):
    if FSDP:    # gather the data-axis shards of the weights once per step
        w = {"w1": jax.lax.all_gather(w["w1"], "data", axis=2, tiled=True),
             "w2": jax.lax.all_gather(w["w2"], "data", axis=3, tiled=True)}
    out = pipeline(w, x)
    last = jax.lax.axis_index("pipe") == STAGES - 1
    return jnp.where(last, jax.lax.pmean(jnp.mean((out - y) ** 2), "tensor"), 0.0)


def local_step(w, opt_state, x, y):
    loss, grads = jax.value_and_grad(loss_fn)(w, x, y)
    if not FSDP:    # under FSDP the gather's transpose already reduce-scatters over data
        grads = jax.lax.pmean(grads, "data")
    updates, opt_state = tx.update(grads, opt_state, w)
    return optax.apply_updates(w, updates), opt_state, jax.lax.psum(jax.lax.pmean(loss, "data"), "pipe")


def setup():
    k1, k2, k3 = jax.random.split(jax.random.PRNGKey(0), 3)
    w = {"w1": jax.random.normal(k1, (STAGES, BLOCKS, D, HIDDEN)) / D ** 0.5,
         "w2": jax.random.normal(k2, (STAGES, BLOCKS, HIDDEN, D)) / HIDDEN ** 0.5}
    w = {k: jax.device_put(v, NamedSharding(mesh, WSPEC[k])) for k, v in w.items()}
    opt_state = tx.init(w)
    ospec = jax.tree.map(lambda a: P(), opt_state)
    ospec = (ospec[0]._replace(mu=WSPEC, nu=WSPEC), ospec[1])
    x = jax.device_put(jax.random.normal(k3, (BATCH, D)), NamedSharding(mesh, P("data", "tensor")))
    y = jnp.tanh(x)
    step = jax.jit(jax.shard_map(local_step, mesh=mesh, in_specs=(WSPEC, ospec, P("data", "tensor"), P("data", "tensor")),
                                 out_specs=(WSPEC, ospec, P()), check_vma=False), donate_argnums=(0, 1))
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
