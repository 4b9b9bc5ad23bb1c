"""`advisor run-workload` and `advisor analyze` end to end, on whatever backend JAX has."""

import json
import shutil

import jax

from conftest import FIXTURES, advisor, analyze_json, cli


def test_run_workload_profiles_and_diagnoses(tmp_path):
    proc = advisor("run-workload", "transformer", "--steps", "2", "--logdir", tmp_path, "--format", "json",
                   "--no-compile-check")     # tests/test_checked_advice.py checks the compile check
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)          # progress went to stderr, stdout is pure JSON
    (run,) = doc["runs"]
    assert run["backend"] == jax.default_backend()
    s = run["summary"]
    assert s["steps"] == 2 and s["step_time_ms"] > 0 and s["peak_memory_bytes"] > 0
    assert s["run"]["workload"] == "transformer" and s["run"]["preset"] == "tiny"
    assert len(s["run"]["step_wall_ms"]) == 2
    assert "scan-dynamic-update-slice" in {f["rule"] for f in run["findings"]}
    run_dir = next(tmp_path.rglob("advisor_run.json")).parent
    meta = json.loads((run_dir / "advisor_run.json").read_text())
    assert meta["config"]["model"]["scan_layers"] is True
    assert meta["memory_analysis"]["temp_size_in_bytes"] > 0
    assert meta["versions"]["jax"] == jax.__version__
    assert (run_dir / "memory.prof").is_file()
    assert "profiling 2 steps" in proc.stderr


def test_json_shape_is_stable():
    doc = analyze_json(FIXTURES / "transformer_scan")
    assert set(doc) >= {"schema_version", "advisor_version", "inputs", "warnings", "runs"}
    run = doc["runs"][0]
    assert set(run) >= {"path", "backend", "summary", "findings"}
    for f in run["findings"]:
        assert set(f) >= {"rule", "severity", "title", "evidence", "recommendation", "source"}
        assert f["severity"] in ("info", "warning", "error")
        assert set(f["recommendation"]) >= {"text", "config", "expected"}


def test_a_logdir_with_many_runs_gives_one_analysis_per_run(tmp_path):
    for name in ("transformer_scan", "transformer_remat", "gpu_scan"):
        shutil.copytree(FIXTURES / name, tmp_path / name)
    doc = analyze_json(tmp_path)
    assert len(doc["runs"]) == 3
    assert {r["backend"] for r in doc["runs"]} == {"cpu", "gpu"}
    # the single-file form works too
    one = next((FIXTURES / "transformer_remat").rglob("*.xplane.pb"))
    assert len(analyze_json(one)["runs"]) == 1


def test_text_report_orders_findings_and_shows_units():
    proc = advisor("analyze", FIXTURES / "transformer_scan")
    assert proc.returncode == 0
    out = proc.stdout
    assert "step time" in out and " ms median over 2 steps" in out and "MiB" in out
    assert out.index("missing-remat") < out.index("scan-dynamic-update-slice") or \
        out.index("scan-dynamic-update-slice") < out.index("missing-remat")
    assert "--set model.scan_layers=false" in out


def test_rules_and_explain():
    proc = cli("rules")
    assert proc.returncode == 0
    for rid in ("scan-dynamic-update-slice", "missing-remat", "missing-buffer-donation"):
        assert rid in proc.stdout
        doc = cli("explain", rid)
        assert doc.returncode == 0 and "## Why is this bad?" in doc.stdout and "## Use instead" in doc.stdout


def test_select_and_ignore():
    assert {f["rule"] for f in analyze_json(FIXTURES / "transformer_scan", "--select", "missing-remat")
            ["runs"][0]["findings"]} == {"missing-remat"}
    assert "missing-remat" not in {f["rule"] for f in analyze_json(
        FIXTURES / "transformer_scan", "--ignore", "missing-remat")["runs"][0]["findings"]}
