"""Two hosts on this machine: data-parallel training under `shard_map` over the 8 devices of two
`jax.distributed` processes (4 simulated CPU devices each, gloo collectives over 127.0.0.1).
Each process traces itself into its own folder; fixtures/record_parallel.py puts both host
files into one run folder. With `slow_host` set, that host's devices do 64 times the
preprocessing work (the other host waits for it at every gradient all-reduce); with the mode
`input` instead, that host's input pipeline takes 40 ms more per step (the host sleeps before
it launches the step: its devices sit idle, the other host's wait).

    python _two_hosts.py LOGDIR PROCESS_ID PORT [SLOW_HOST [compute|input]]
"""
import functools
import sys
import time

import jax

jax.config.update("jax_cpu_collectives_implementation", "gloo")

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402
from jax.experimental import multihost_utils  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

WIDTH, BATCH = 256, 256
tx = optax.sgd(1e-2)


def loss_fn(params, x, y):
    h = jnp.tanh(x @ params["w"] + params["b"])
    return jnp.mean((h - y) ** 2)


def preprocess(x, iters):
    mix = jnp.eye(WIDTH) * 0.5 + 0.5 / WIDTH
    return jax.lax.fori_loop(0, iters, lambda _, h: jnp.tanh(h @ mix), x)


def main(logdir, process_id, port, slow_host=None, mode="compute"):
    jax.distributed.initialize(f"127.0.0.1:{port}", num_processes=2, process_id=process_id)
    mesh = Mesh(np.array(jax.devices()), ("data",))

    @functools.partial(jax.shard_map, mesh=mesh, in_specs=(P(), P(), P("data"), P("data"), P("data")),
                       out_specs=(P(), P(), P()))
    def train_step(params, opt_state, x, y, iters):
        x = preprocess(x, iters[0])
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        grads = jax.lax.pmean(grads, "data")
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, jax.lax.pmean(loss, "data")

    step = jax.jit(train_step, donate_argnums=(0, 1))
    rep, data = NamedSharding(mesh, P()), NamedSharding(mesh, P("data"))
    k1, k2 = jax.random.split(jax.random.PRNGKey(0))
    host_params = {"w": np.asarray(jax.random.normal(k1, (WIDTH, WIDTH))) / WIDTH ** 0.5,
                   "b": np.zeros(WIDTH, np.float32)}
    params = jax.tree.map(lambda a: multihost_utils.host_local_array_to_global_array(a, mesh, P()), host_params)
    opt_state = tx.init(params)
    local = len(jax.local_devices())
    x_local = np.asarray(jax.random.normal(jax.random.fold_in(k2, process_id), (BATCH // 2, WIDTH)))
    slow_compute = slow_host == process_id and mode == "compute"
    iters_local = np.full(local, 64 if slow_compute else 1, np.int32)
    x, y, iters = (multihost_utils.host_local_array_to_global_array(a, mesh, P("data"))
                   for a in (x_local, np.tanh(x_local[:, ::-1]), iters_local))
    params, opt_state, loss = step(params, opt_state, x, y, iters)
    loss.block_until_ready()
    with jax.profiler.trace(logdir):
        for i in range(4):
            with jax.profiler.StepTraceAnnotation("train", step_num=i):
                if slow_host == process_id and mode == "input":
                    time.sleep(0.04)      # the next batch takes this long to arrive on this host
                params, opt_state, loss = step(params, opt_state, x, y, iters)
        loss.block_until_ready()
    multihost_utils.sync_global_devices("done")
    jax.distributed.shutdown()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]) if len(sys.argv) > 4 else None,
         sys.argv[5] if len(sys.argv) > 5 else "compute")
