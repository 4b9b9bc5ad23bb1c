"""Loss of a bundled workload on N devices against one device, same global batch (run by
tests/test_parallel_workloads.py in a process started with 8 simulated CPU devices)."""
import json
import sys

import jax

from advisor import workloads
from advisor.workload_memory import compile_abstract
from advisor.workloads.train import zero_metrics


def losses(name, overrides, steps=2):
    config = workloads.resolve(name, "tiny", overrides)
    built, compiled, minibatch = compile_abstract(name, config)
    state = built.init_state()
    metrics = zero_metrics(built.loss_fn, state, minibatch)
    state, metrics = built.place(state, metrics)
    out = []
    for _ in range(steps):
        state, metrics = compiled(state, metrics, built.batch)
        out.append(float(metrics["loss"][0] / metrics["loss"][1]))
    return out, compiled.as_text()


if __name__ == "__main__":
    name, n = sys.argv[1], int(sys.argv[2])
    base = ["model.dropout_rate=0", *sys.argv[3:]]
    one, _ = losses(name, base)
    many, hlo = losses(name, base + [f"parallel.data={n}"])
    fsdp, fsdp_hlo = losses(name, base + [f"parallel.data={n}", "parallel.fsdp=true", "parallel.fsdp_min_size=1024"])
    print(json.dumps({"devices": jax.device_count(), "one": one, "many": many, "fsdp": fsdp,
                      "all_reduce": "all-reduce" in hlo, "all_gather": "all-gather" in fsdp_hlo}))
