"""Part 4.2-style asynchronous tensor parallelism: the same four MLP blocks over data=2 x tensor=4
(8 simulated CPU devices), with the all-gather and the reduce-scatter replaced by `ppermute` rings:
each step of a ring multiplies the feature shard at hand while the next one travels. Gradients
`pmean` over data, Adam, donated, warm, annotated."""
import sys

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

DATA, TENSOR, BLOCKS = 2, 4, 4
D, HIDDEN, BATCH = 256, 1024, 128
tx = optax.adam(1e-3)
mesh = Mesh(np.array(jax.devices()).reshape(DATA, TENSOR), ("data", "tensor"))


def gather_matmul(x, w):
    """x @ w for x's features split over `tensor`, w's rows whole: one shard per ring step."""
    index = jax.lax.axis_index("tensor")
    rows = w.reshape(TENSOR, D // TENSOR, -1)
    ring = [(i, (i + 1) % TENSOR) for i in range(TENSOR)]
    acc = x @ rows[index]
    for k in range(1, TENSOR):
        x = jax.lax.ppermute(x, "tensor", ring)
        acc = acc + x @ rows[(index - k) % TENSOR]
    return acc


def matmul_scatter(h, w):
    """The sum over `tensor` of h @ w, each device keeping its feature shard: a ring of partial sums."""
    index = jax.lax.axis_index("tensor")
    cols = w.reshape(-1, TENSOR, D // TENSOR)
    ring = [(i, (i + 1) % TENSOR) for i in range(TENSOR)]
    acc = h @ cols[:, (index - 1) % TENSOR]
    for k in range(1, TENSOR):
        acc = jax.lax.ppermute(acc, "tensor", ring) + h @ cols[:, (index - 1 - k) % TENSOR]
    return acc


def block(w, x):
    h = jax.nn.gelu(gather_matmul(x, w["w1"]))                            # [B, HIDDEN / T]
    return x + matmul_scatter(h, w["w2"])


def loss_fn(w, x, y):
    for b in range(BLOCKS):
        x = block({k: v[b] for k, v in w.items()}, x)
    return jax.lax.pmean(jnp.mean((x - y) ** 2), "tensor")


def local_step(w, opt_state, x, y):
    loss, grads = jax.value_and_grad(loss_fn)(w, x, y)
    grads = jax.lax.pmean(grads, "data")
    updates, opt_state = tx.update(grads, opt_state, w)
    return optax.apply_updates(w, updates), opt_state, jax.lax.pmean(loss, "data")


def setup():
    k1, k2, k3 = jax.random.split(jax.random.PRNGKey(0), 3)
    w = {"w1": jax.random.normal(k1, (BLOCKS, D, HIDDEN)) / D ** 0.5,
         "w2": jax.random.normal(k2, (BLOCKS, HIDDEN, D)) / HIDDEN ** 0.5}
    wspec = {"w1": P(None, None, "tensor"), "w2": P(None, "tensor", None)}
    w = {k: jax.device_put(v, NamedSharding(mesh, wspec[k])) for k, v in w.items()}
    opt_state = tx.init(w)
    ospec = jax.tree.map(lambda a: P(), opt_state)
    ospec = (ospec[0]._replace(mu=wspec, nu=wspec), ospec[1])
    x = jax.device_put(jax.random.normal(k3, (BATCH, D)), NamedSharding(mesh, P("data", "tensor")))
    y = jnp.tanh(x)
    step = jax.jit(jax.shard_map(local_step, mesh=mesh, in_specs=(wspec, ospec, P("data", "tensor"), P("data", "tensor")),
                                 out_specs=(wspec, ospec, P()), check_vma=False), donate_argnums=(0, 1))
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
