"""The programs tests/test_efficiency.py counts on paper, recorded with their efficiency view.

Run as a child process (`python tests/efficiency_programs.py FOLDER`) by the test, with XLA's
default optimization: the test judges which bound the ops' measured times give, and the suite's
-O0 codegen (tests/conftest.py) would make the scan's slicing copies slow enough to change it.
Prints the three `summary.efficiency` documents as one JSON object.
"""

import json
import sys
from pathlib import Path

import jax
import jax.numpy as jnp

import advisor

B, D, L = 1024, 512, 4
PEAKS = {"peak_flops": "2T", "peak_bandwidth": "100GB/s"}     # given: ridge point 20 FLOP/B


def mlp_unrolled(ws, x):
    for w in ws:
        x = jnp.tanh(x @ w)
    return jnp.mean(x ** 2)


def mlp_scanned(ws, x):
    return jnp.mean(jax.lax.scan(lambda h, w: (jnp.tanh(h @ w), None), x, ws)[0] ** 2)


def _chain(x):
    for _ in range(8):
        x = x * 1.0001 + 0.5
    return x


def _record(logdir, fn, args, steps=3):
    step = jax.jit(fn)
    jax.block_until_ready(step(*args))     # compiled before the trace
    with advisor.trace(logdir, select=[], **PEAKS) as t:
        for _ in range(steps):
            with t.step():
                out = step(*args)
        jax.block_until_ready(out)
    return t.report.runs[0].summary["efficiency"]


def record_all(folder: Path) -> dict:
    ws = jax.random.normal(jax.random.PRNGKey(0), (L, D, D)) / D ** 0.5
    x = jax.random.normal(jax.random.PRNGKey(1), (B, D))
    return {
        "unrolled": _record(folder / "unrolled", jax.grad(mlp_unrolled), ([ws[i] for i in range(L)], x)),
        "scanned": _record(folder / "scanned", jax.grad(mlp_scanned), (ws, x)),
        "chain": _record(folder / "chain", _chain, (jnp.ones((4096, 4096)),)),
    }


if __name__ == "__main__":
    print(json.dumps(record_all(Path(sys.argv[1]))))
