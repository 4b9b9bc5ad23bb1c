"""Inputs others produced: outputs that would land on them, non-finite baselines, badly typed values,
bombs. Each ends in one line on stderr and a documented exit code, never a traceback or a lost file."""

from __future__ import annotations

import json
import shutil

import pytest

from conftest import FIXTURES, cli

SCAN = FIXTURES / "transformer_scan"


def one_line(proc, code=2):
    assert proc.returncode == code, (proc.stdout, proc.stderr)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


@pytest.fixture()
def run(tmp_path):
    shutil.copytree(SCAN, tmp_path / "scan")
    return tmp_path / "scan"


def _snapshot(root):
    return {p: p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_outputs_never_overwrite_or_enter_an_input(run, tmp_path):
    xplane = next(run.rglob("*.xplane.pb"))
    before = _snapshot(run)
    for args in (["analyze", run, "--format", "json", "--output", xplane],
                 ["analyze", xplane, "--output", xplane.parent / "report.txt"],
                 ["analyze", run, "--output", run / "report.txt"],
                 ["compare", run, SCAN, "--output", run / "nested" / "cmp.txt"],
                 ["check", run, "--write-baseline", xplane],
                 ["check", run, "--write-baseline", tmp_path / "b.json", "--junit", run / "j.xml"],
                 ["check", run, "--write-baseline", tmp_path / "b.json", "--sarif", tmp_path / "b.json"]):
        line = one_line(cli(*args))
        assert "advisor: error:" in line and ("input" in line or "reads" in line or "same file" in line), line
    assert _snapshot(run) == before


def test_a_link_to_the_input_is_the_input(run, tmp_path):
    xplane = next(run.rglob("*.xplane.pb"))
    link = tmp_path / "link.pb"
    link.symlink_to(xplane)
    one_line(cli("analyze", xplane, "--format", "json", "--output", link))


def test_write_baseline_may_update_the_baseline_it_reads(run, tmp_path):
    baseline = tmp_path / "b.json"
    assert cli("check", run, "--write-baseline", baseline).returncode == 0
    proc = cli("check", run, "--baseline", baseline, "--write-baseline", baseline)
    assert proc.returncode == 0, proc.stderr
    json.loads(baseline.read_text())


def test_a_failed_write_leaves_the_previous_file(tmp_path):
    from advisor.outputs import atomic_open
    out = tmp_path / "report.json"
    out.write_text("previous")
    with pytest.raises(RuntimeError):
        with atomic_open(out) as fh:
            fh.write("half")
            raise RuntimeError("interrupted")
    assert out.read_text() == "previous" and list(tmp_path.iterdir()) == [out]


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_a_non_finite_baseline_is_refused(run, tmp_path, value):
    """A NaN step time compares false with everything: every budget would pass."""
    baseline = tmp_path / "b.json"
    assert cli("check", run, "--write-baseline", baseline).returncode == 0
    text = baseline.read_text()
    doc = json.loads(text)
    peak = doc["metrics"]["peak_memory_bytes"]
    baseline.write_text(text.replace(f'"peak_memory_bytes": {peak}', f'"peak_memory_bytes": {value}'))
    assert one_line(cli("check", run, "--baseline", baseline)).startswith("advisor: error:")


@pytest.mark.parametrize("key,value", [("step_times_ms", '["1"]'), ("peak_memory_bytes", '"big"'),
                                       ("backend", "5"), ("category_ms_per_step", "[]")])
def test_a_badly_typed_baseline_is_refused(run, tmp_path, key, value):
    baseline = tmp_path / "b.json"
    assert cli("check", run, "--write-baseline", baseline).returncode == 0
    doc = json.loads(baseline.read_text())
    doc["metrics"][key] = json.loads(value)
    baseline.write_text(json.dumps(doc))
    assert key in one_line(cli("check", run, "--baseline", baseline))


def test_a_deeply_nested_baseline_is_one_line(run, tmp_path):
    baseline = tmp_path / "b.json"
    baseline.write_text("[" * 100_000 + "]" * 100_000)
    one_line(cli("check", run, "--baseline", baseline))


@pytest.mark.parametrize("budget", ["nan", "inf", "-5%", "nan%"])
def test_budgets_must_be_finite_and_positive(run, tmp_path, budget):
    baseline = tmp_path / "b.json"
    assert cli("check", run, "--write-baseline", baseline).returncode == 0
    one_line(cli("check", run, "--baseline", baseline, "--max-memory-regression", budget))
