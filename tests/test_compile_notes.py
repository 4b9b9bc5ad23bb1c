"""A compilation-cache hit is not a compilation: jit's slow path finding the program it already
compiled (a first call with a NumPy argument, then device arrays) records a Python-side `compile`
event of about 10 us with no backend compile inside it."""

import jax
import jax.numpy as jnp
import numpy as np

import advisor


def test_a_warmed_up_loop_reports_no_compilation(tmp_path):
    @jax.jit
    def step(w, x):
        return w - 0.01 * jax.grad(lambda w: jnp.mean(jnp.tanh(x @ w) ** 2))(w)

    x = jnp.ones((256, 512))
    w = step(np.ones((512, 512), np.float32), x)     # warm-up with a NumPy array: the loop's calls miss jit's fast path
    w.block_until_ready()
    with advisor.trace(tmp_path) as t:
        for _ in range(4):
            with t.step():
                w = step(w, x)
    profile = t.report.runs[0].profile
    hits = [e for e in profile.host_events if e.category == "compile"]
    assert hits and all(e.duration_ns < 1e6 for e in hits), "the trace should hold the cache hit this test is about"
    assert not [n for n in profile.notes if "compilation" in n], profile.notes
    assert "recompilation" not in {f.rule for f in t.report.runs[0].findings}
