"""The Python API on a training loop written here (not a bundled workload): advisor.trace,
advisor.preflight, advisor.analyze, and the CLI built on them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import linen as nn
from flax.training import train_state

import advisor

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "fixtures" / "transformer_scan"


class MLP(nn.Module):
    @nn.compact
    def __call__(self, x):
        x = nn.relu(nn.Dense(256)(x))
        x = nn.relu(nn.Dense(256)(x))
        return nn.Dense(10)(x)


def make_state():
    model = MLP()
    params = model.init(jax.random.PRNGKey(0), jnp.zeros((1, 64)))["params"]
    return train_state.TrainState.create(apply_fn=model.apply, params=params, tx=optax.adam(1e-3))


def loss_fn(params, state, batch):
    logits = state.apply_fn({"params": params}, batch["x"])
    return optax.softmax_cross_entropy_with_integer_labels(logits, batch["y"]).mean()


def train_step(state, batch):
    loss, grads = jax.value_and_grad(loss_fn)(state.params, state, batch)
    return state.apply_gradients(grads=grads), loss


def batches(n):
    rng = np.random.default_rng(0)
    return [{"x": jnp.asarray(rng.normal(size=(128, 64)), jnp.float32),
             "y": jnp.asarray(rng.integers(0, 10, size=128))} for _ in range(n)]


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    """The same loop twice: plain, then inside advisor.trace (after one warm-up step each)."""
    step = jax.jit(train_step)
    data = batches(4)
    plain = make_state()
    for b in data:
        plain, _ = step(plain, b)
    state = make_state()
    state, _ = step(state, data[0])
    logdir = tmp_path_factory.mktemp("logs")
    with advisor.trace(logdir) as t:
        for b in data[1:]:
            with t.step():
                state, loss = step(state, b)
    return t, state, plain, logdir


def test_trace_reports_the_users_loop(traced):
    t, _, _, logdir = traced
    assert t.run_dir is not None and t.run_dir.parent == logdir / "plugins" / "profile"
    assert (t.run_dir / "memory.prof").is_file()
    (run,) = t.report.runs
    assert run.summary["steps"] == 3 and run.summary["steps_from"] == "step annotations"
    assert run.summary["step_time_ms"] > 0
    assert "train_step" in run.summary["step_module"]
    # the user's source lines: where the device memory profile attributes the live buffers
    sites = [s["site"] for e in run.summary.get("device_memory_profile", []) for s in e["largest_sites"]]
    sources = sites + [f.source for f in run.findings if f.source]
    assert any("test_api.py" in s for s in sources), sources
    doc = json.loads(t.report.to_json())
    assert doc["command"] == "analyze" and doc["runs"][0]["summary"] == run.summary


def test_trace_does_not_change_what_the_loop_computes(traced):
    _, state, plain, _ = traced
    for a, b in zip(jax.tree_util.tree_leaves(state.params), jax.tree_util.tree_leaves(plain.params)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_trace_reraises_and_closes_the_trace(tmp_path):
    step = jax.jit(train_step)
    state = make_state()
    (b,) = batches(1)
    with pytest.raises(ZeroDivisionError):
        with advisor.trace(tmp_path / "a") as t:
            with t.step():
                state, _ = step(state, b)
            raise ZeroDivisionError
    # the trace was stopped: a new one can start in this process
    with advisor.trace(tmp_path / "b") as t2:
        with t2.step():
            state, _ = step(state, b)
    assert t2.report.runs[0].summary["steps"] == 1
    assert t.report is not None or t.error


@pytest.fixture(scope="module")
def step_args():
    state = make_state()
    (b,) = batches(1)
    return state, b


def test_preflight_fits_and_breaks_down(step_args):
    state, b = step_args
    plan = advisor.preflight(train_step, state, b)
    br = plan.breakdown
    assert set(br) == {"arguments", "outputs", "temporaries", "aliased"}
    assert plan.required_bytes == br["arguments"] + br["outputs"] + br["temporaries"] - br["aliased"]
    assert plan.fits and plan.capacity_bytes > plan.required_bytes
    small = advisor.preflight(train_step, state, b, memory_limit="100KB")
    assert not small.fits and small.capacity_bytes == 100_000 and small.capacity_source == "memory_limit"


def test_preflight_from_shapes_only(step_args):
    state, b = step_args
    shapes = jax.eval_shape(lambda: (state, b))
    assert advisor.preflight(train_step, *shapes).required_bytes == \
        advisor.preflight(train_step, state, b).required_bytes


def test_preflight_donation_hint(step_args):
    state, b = step_args
    plan = advisor.preflight(jax.jit(train_step), state, b)
    params_bytes = sum(x.nbytes for x in jax.tree_util.tree_leaves(state) if hasattr(x, "nbytes"))
    assert plan.donation and plan.donation["argnums"] == [0]
    assert plan.donation["saving_bytes"] == params_bytes
    assert "donate_argnums=(0,)" in plan.donation["text"]
    donated = advisor.preflight(jax.jit(train_step, donate_argnums=0), state, b)
    assert donated.donation is None
    assert donated.breakdown["aliased"] > 0 and donated.required_bytes < plan.required_bytes


def test_analyze_equals_the_cli_json():
    report = advisor.analyze(FIXTURE)
    cli = subprocess.run([sys.executable, "-m", "advisor", "analyze", str(FIXTURE), "--format", "json"],
                         capture_output=True, text=True, check=True, cwd=ROOT)
    assert cli.stdout == report.to_json() + "\n"
    run = report.runs[0]
    assert [f.rule for f in run.findings] == [f["rule"] for f in json.loads(cli.stdout)["runs"][0]["findings"]]


def test_str_of_a_report_is_the_cli_text_report(tmp_path, traced):
    """print(report) from a script prints what `advisor analyze` prints, not a one-line repr."""
    from conftest import cli as run_cli

    report = advisor.analyze(FIXTURE)
    assert str(report) == report.to_text() == run_cli("analyze", FIXTURE).stdout
    assert run_cli("analyze", FIXTURE, "--output", tmp_path / "r.txt").returncode == 0
    assert (tmp_path / "r.txt").read_text(encoding="utf-8") == str(report)
    assert "finding" in str(report) and "\x1b[" not in str(report)
    text = str(traced[0].report)
    assert text.startswith(str(traced[0].run_dir)) and "step time" in text
    assert repr(report).startswith("<advisor.Report")


def test_analyze_select_and_bad_input():
    from advisor.errors import AdvisorError

    report = advisor.analyze(FIXTURE, select=["missing-remat"])
    assert [f.rule for f in report.runs[0].findings] == ["missing-remat"]
    with pytest.raises(AdvisorError, match="unknown rule"):
        advisor.analyze(FIXTURE, select=["no-such-rule"])


def test_to_pandas():
    pytest.importorskip("pandas")
    tables = advisor.analyze(FIXTURE).to_pandas()
    assert list(tables["findings"]["rule"]) == [f.rule for f in advisor.analyze(FIXTURE).runs[0].findings]
    assert tables["ops"]["self_time_ms"].sum() > 0


def test_import_is_light():
    out = subprocess.run([sys.executable, "-c", "import sys, advisor; print('jax' in sys.modules)"],
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_the_trace_s_own_wait_is_not_taken_for_the_program_s_sync(traced):
    """t.step() waits for each step's device work: that wait is advisor's, named in the trace, and
    host-bound never blames the user's loop for it ("mostly sync": fetch metrics every N steps)."""
    t, _, _, _ = traced
    profile = t.report.runs[0].profile
    waits = [e for e in profile.host_events if e.category == "tool"]
    assert len(waits) == 4      # one per step, one as the trace ends
    syncs = [e for e in profile.host_events if e.category == "sync"]
    assert syncs and all(any(w.start_ns <= s.start_ns < w.start_ns + w.duration_ns for w in waits) for s in syncs)
    for f in t.report.runs[0].findings:
        assert not (f.rule == "host-bound" and f.evidence["likely_cause"] == "sync"), f.title
