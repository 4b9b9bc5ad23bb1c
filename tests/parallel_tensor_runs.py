"""The Transformer's tensor-parallel modes and 3D mesh on 8 simulated CPU devices (run by
tests/test_parallel_tensor.py in one process started with them): the losses of three steps of
each layout (dropout off, so that all compute the same function), and a one-step trace of the
async layout and of the 3D one, recorded by the runner into the folder given."""
import json
import os
import sys
import time
from pathlib import Path

import jax

from advisor import compile_cache, workloads
from advisor.runner import profile_workload
from parallel_workload_loss import losses

BASE = ["model.dropout_rate=0", "train.steps=1", "data.seq_len=32", "data.vocab_size=128", "model.hidden_size=64",
        "model.head_dim=16", "model.num_layers=4"]
LAYOUTS = {
    "sync": ["parallel.data=2", "parallel.tensor=4"],
    "async": ["parallel.data=2", "parallel.tensor=4", "parallel.tensor.mode=async"],
    "3d": ["parallel.data=2", "parallel.pipeline.stages=2", "parallel.pipeline.microbatches=2", "parallel.tensor=2"],
    "3d_async": ["parallel.data=2", "parallel.pipeline.stages=2", "parallel.pipeline.microbatches=2",
                 "parallel.tensor=2", "parallel.tensor.mode=async"],
}
RECORDED = ("sync", "async", "3d_async")

if __name__ == "__main__":
    out = Path(sys.argv[1])
    os.environ.setdefault(compile_cache.ENV, str(out / "compile-cache"))
    result = {"devices": jax.device_count(), "losses": {}, "runs": {}, "permutes": {}}
    for name, overrides in LAYOUTS.items():
        t0 = time.perf_counter()
        if name in RECORDED:
            config = workloads.resolve("transformer", "tiny", BASE + overrides)
            result["runs"][name] = str(profile_workload("transformer", "tiny", config, out / name))
            print(f"{name} recorded: {time.perf_counter() - t0:.1f} s", file=sys.stderr)
        with compile_cache.active(write=False):      # the recorded layouts' step loads from the cache
            result["losses"][name], hlo = losses("transformer", BASE + overrides, steps=3)
        print(f"{name}: {time.perf_counter() - t0:.1f} s", file=sys.stderr)
        result["permutes"][name] = hlo.count("collective-permute-start(") + hlo.count("collective-permute(")
    print(json.dumps(result))
