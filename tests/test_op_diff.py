"""Which ops changed between two runs (advisor/op_diff.py over the op_table view): compare and a
failing check name the ops that grew, shrank, appeared or vanished, matched across two programs by
op_name and source line (or the HLO fingerprint), never by instruction number."""

import copy
import io
import json

import pytest

from advisor import op_diff
from advisor.check import run_check
from advisor.compare import Metrics, compare, metrics
from advisor.report import layout
from advisor.report.compare_text import ops as render_ops
from advisor.views.op_table import match_name
from conftest import FIXTURES, cli


@pytest.fixture(scope="module")
def documents(loaded_profile):
    """{fixture: its result document}: the no-remat scan and the remat recording of the Transformer."""
    return {name: loaded_profile(name)[0].document() for name in ("transformer_scan", "transformer_remat")}


def _diff(base: dict, new: dict) -> op_diff.OpDiff:
    return compare(metrics(base), metrics(new)).ops


def test_remat_ops_appear_and_the_stacked_buffers_vanish(documents):
    d = _diff(documents["transformer_scan"], documents["transformer_remat"])
    assert not d.missing
    appeared = {(c.label, c.source) for c in d.by_time() if c.time == "appeared"}
    # what remat recomputes in the backward pass: the MLP's and the attention's matmuls, at their lines
    assert ("mlp/input_layer/dot_general (recomputed by remat)", "advisor/workloads/transformer.py:89") in appeared
    assert ("attn/qkv/dot_general (recomputed by remat)", "advisor/workloads/transformer.py:105") in appeared
    assert all("rematted_computation" in c.name for c in d.by_time() if c.time == "appeared" and c.delta_ms > 1)
    # the backward pass's own matmul is matched across the programs (remat adds checkpoint/ and a
    # second block scope to its op_name): on both sides, under other instruction names
    backward = next(c for c in d.changed if c.label == "mlp/input_layer/dot_general (backward)")
    assert backward.base and backward.new and backward.time in ("grew", "shrank")
    assert backward.base["instructions"] != backward.new["instructions"]
    assert any(c.time == "grew" for c in d.by_time()[:5])
    # scan's stacked per-layer buffers (XLA's copies, no op_name: matched by fingerprint) leave the peak
    memory = {c.name: c for c in d.by_memory()}
    assert memory["copy f32[4,8,128,512]"].memory == "vanished"
    assert memory["copy f32[4,8,128,512]"].base_bytes == 5 * 8 * 2**20
    # the top of the list is the largest change in time per step
    changes = [abs(c.delta_ms) for c in d.by_time()]
    assert changes == sorted(changes, reverse=True)


def test_identical_runs_give_an_empty_diff(documents):
    doc = documents["transformer_scan"]
    d = _diff(doc, copy.deepcopy(doc))
    assert d.changed == () and d.unchanged > 100 and not d.missing
    out = io.StringIO()
    render_ops(d, layout.console(out))
    assert out.getvalue().startswith("ops: the same in both runs")


def test_a_baseline_without_ops_degrades_gracefully(documents):
    """A baseline written before advisor recorded ops: the diff and the failing check say so."""
    recorded = json.loads((FIXTURES / "baselines" / "transformer_remat.json").read_text())["metrics"]
    assert recorded["ops"]["ops"]
    old = Metrics.from_json({k: v for k, v in recorded.items() if k != "ops"})
    assert old.ops is None
    result = run_check(documents["transformer_scan"], old, "error", 0.1, 0.05, [])
    memory = next(c for c in result.checks if c.name == "budget:peak-memory")
    assert not memory.passed
    assert "which ops grew: not known (the baseline holds no ops" in memory.message
    assert result.comparison.to_json()["ops"]["missing"].startswith("the baseline holds no ops")


def _steady(document: dict, ms: float) -> dict:
    """The document with every step taking `ms`: no spread, so a slower step time is judged."""
    out = copy.deepcopy(document)
    out["views"]["step_time"]["step_times_ms"] = [ms] * len(out["views"]["step_time"]["step_times_ms"])
    return out


def test_a_check_failing_on_time_or_memory_names_the_op_that_grew_and_its_line(documents):
    base = Metrics.from_json(json.loads(json.dumps(metrics(_steady(documents["transformer_remat"], 100.0)).to_json())))
    result = run_check(_steady(documents["transformer_scan"], 150.0), base, "error", 0.1, 0.05, [])
    time, memory = (next(c for c in result.checks if c.name == n) for n in ("budget:step-time", "budget:peak-memory"))
    assert not time.passed and not memory.passed
    # time: XLA's stacking copy grew most (no source line), then the op with a line, scan's stacking
    assert "the op that grew most: copy f32[4,8,128,128], 0.94 -> 13.16 ms per step (x14.05);" in time.message
    assert ("with a source line: jit(dynamic_update_index_in_dim)/dynamic_update_slice (forward), 0.39 -> 10.17 ms "
            "per step (x25.96), at advisor/workloads/transformer.py:142") in time.message
    assert time.source == "advisor/workloads/transformer.py:142"
    # memory: the stacked activations appear at the peak
    assert "the op that grew most: copy f32[4,8,128,512], none -> 40.0 MiB live at the peak;" in memory.message
    assert memory.source == "advisor/workloads/transformer.py:142"
    # a check that passes says nothing of ops
    result = run_check(documents["transformer_scan"], base, "error", 10.0, 5.0, [])
    assert all("grew most" not in c.message for c in result.checks)


@pytest.mark.parametrize("op_name, expected", [
    # remat's scopes around an unchanged op are left out: the same key with remat or without
    ("jit(train_step)/transpose(jvp(Transformer))/while/body/closed_call/block.<lambda>/block/block.<lambda>/block/"
     "checkpoint/mlp/input_layer/dot_general",
     "jit(train_step)/transpose(jvp(Transformer))/while/body/block.<lambda>/block/mlp/input_layer/dot_general"),
    ("jit(train_step)/transpose(jvp(Transformer))/while/body/closed_call/block.<lambda>/block/mlp/input_layer/dot_general",
     "jit(train_step)/transpose(jvp(Transformer))/while/body/block.<lambda>/block/mlp/input_layer/dot_general"),
    # what remat recomputes stays apart
    ("jit(f)/transpose(jvp(M))/checkpoint/rematted_computation/mlp/dot_general",
     "jit(f)/transpose(jvp(M))/rematted_computation/mlp/dot_general"),
    # a loop in a loop is nesting, never collapsed
    ("jit(f)/while/body/while/body/add", "jit(f)/while/body/while/body/add"),
])
def test_match_name(op_name, expected):
    assert match_name(op_name) == expected


def _entry(name, source, ms, peak=0, instructions=("fusion.1",)):
    return {"name": name, "source": source, "ms_per_step": ms, "per_step": 1.0, "peak_bytes": peak,
            "instructions": list(instructions), "category": "fusion"}


def test_ops_whose_lines_moved_are_matched_by_name_and_file():
    """An edit above them moves every line: the same ops, matched in line order, not appeared and vanished."""
    base = {"steps": 2, "ops": [_entry("jit(f)/dot_general", "model.py:10", 1.0),
                                _entry("jit(f)/dot_general", "model.py:20", 2.0),
                                _entry("jit(f)/tanh", "model.py:11", 0.5)]}
    new = {"steps": 2, "ops": [_entry("jit(f)/dot_general", "model.py:13", 1.0),
                               _entry("jit(f)/dot_general", "model.py:23", 3.0),
                               _entry("jit(f)/tanh", "model.py:14", 0.5),
                               _entry("jit(f)/exp", "model.py:15", 0.7)]}
    d = op_diff.diff(base, new)
    assert [(c.time, c.source, c.to_json().get("base_source")) for c in d.changed] == [
        ("grew", "model.py:23", "model.py:20"), ("appeared", "model.py:15", None)]
    assert d.unchanged == 2


def test_names_from_a_trace_are_inert_in_the_text(documents):
    evil = "jit(f)/\x1b[31mred[/]\u202e/dot_general"
    d = op_diff.diff({"steps": 1, "ops": [_entry(evil, "m.py:1", 1.0)]},
                     {"steps": 1, "ops": [_entry(evil, "m.py:1", 2.0)]})
    out = io.StringIO()
    render_ops(d, layout.console(out))
    text = out.getvalue()
    assert "\x1b" not in text and "\u202e" not in text and "\\x1b[31mred[/]" in text


def test_a_run_without_hlo_says_why():
    d = op_diff.diff({"steps": 2, "ops": [],
                      "why": "the trace holds no HLO of the step program: its ops cannot be named"},
                     {"steps": 2, "ops": [_entry("jit(f)/add", None, 1.0)]})
    assert d.changed == () and d.missing.startswith("the base run: the trace holds no HLO")


def test_check_against_a_baseline_names_the_op_in_ci(tmp_path):
    """The committed baseline records ops: the failing memory check points SARIF and GitHub at the line."""
    sarif, summary = tmp_path / "check.sarif", tmp_path / "summary.md"
    proc = cli("check", FIXTURES / "transformer_scan", "--baseline", FIXTURES / "baselines" / "transformer_remat.json",
               "--sarif", sarif, env={"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary)})
    assert proc.returncode == 1, proc.stderr
    line = next(text for text in proc.stdout.splitlines()
                if text.startswith("::error") and "budget%3Apeak-memory" in text)
    assert "file=advisor/workloads/transformer.py,line=142," in line and "the op that grew most" in line
    result = next(r for r in json.loads(sarif.read_text())["runs"][0]["results"] if r["ruleId"] == "budget:peak-memory")
    assert result["locations"][0]["physicalLocation"]["region"] == {"startLine": 142}


def test_a_baseline_whose_ops_are_not_what_advisor_writes_is_refused(tmp_path):
    """A hand-edited op table is bad input: one line, exit 2, never a traceback."""
    doc = json.loads((FIXTURES / "baselines" / "transformer_remat.json").read_text())
    doc["metrics"]["ops"]["ops"][0]["source"] = 142
    path = tmp_path / "baseline.json"
    path.write_text(json.dumps(doc))
    proc = cli("check", FIXTURES / "transformer_remat", "--baseline", path)
    assert proc.returncode == 2
    assert "not an advisor baseline (TypeError: metrics.ops is" in proc.stderr and "Traceback" not in proc.stderr
