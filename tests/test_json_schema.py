"""Every command's `--format json` output validates against the JSON Schema shipped in the package."""

import json

import jsonschema
import pytest

from advisor.report.json_report import SCHEMA_FILES, schema
from conftest import FIXTURES, cli


def validate(command, proc):
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    jsonschema.Draft202012Validator(schema(command)).validate(doc)
    assert list(doc)[:5] == ["schema_version", "advisor_version", "command", "inputs", "warnings"]
    assert doc["command"] == command
    return doc


def test_every_schema_is_a_valid_draft_2020_12_schema():
    for name in set(SCHEMA_FILES.values()):
        jsonschema.Draft202012Validator.check_schema(schema(name.removesuffix(".json")))


def test_analyze():
    doc = validate("analyze", cli("analyze", FIXTURES / "transformer_scan", "--format", "json"))
    assert doc["runs"][0]["summary"]["peak_memory_bytes"] > 0 and doc["failed"] == []


def test_compare():
    doc = validate("compare", cli("compare", FIXTURES / "transformer_scan", FIXTURES / "transformer_remat",
                                      "--format", "json"))
    assert doc["inputs"] == [str(FIXTURES / "transformer_scan"), str(FIXTURES / "transformer_remat")]


@pytest.mark.parametrize("args", [["rules"], ["explain", "missing-remat"]])
def test_rules_and_explain(args):
    doc = validate(args[0], cli(*args, "--format", "json"))
    rules = doc["rules"] if args[0] == "rules" else [doc["rule"]]
    assert "missing-remat" in [r["id"] for r in rules]


def test_run_workload_and_its_out_of_memory_path(tmp_path):
    """The MLP workload end to end (the Transformer's run-workload test is in test_end_to_end.py;
    sweep's schema is checked by test_verify_preflight_sweep.py on its own run)."""
    doc = validate("run-workload", cli("run-workload", "mlp", "--preset", "tiny", "--steps", "1",
                                           "--logdir", tmp_path, "--format", "json"))
    assert doc["runs"][0]["summary"]["steps"] == 1
    doc = validate("run-workload", cli("run-workload", "mlp", "--memory-limit", "1MB", "--logdir", tmp_path,
                                           "--select", "host-bound", "--format", "json"))
    assert doc["runs"][0]["findings"][0]["rule"] == "out-of-memory"
