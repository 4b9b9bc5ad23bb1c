"""The rules on traces of plain Flax / JAX programs recorded here, not by our workloads."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import analyze_json, rule_ids

PROGRAMS = Path(__file__).with_name("plain_programs.py")


# Programs whose findings are judged on shares of step time (host-side rules) are recorded with
# XLA's default codegen, not the suite's -O0 (tests/conftest.py): slower ops would shrink a copy's
# share of the step toward the rule's threshold on a loaded machine.
TIMED = {"recompile", "print", "h2d", "clean", "unannotated"}


PLAIN = {
    "scan": ("tower",), "scan_remat": ("tower", "remat"), "unrolled": ("tower", "unrolled"),
    "wide": ("wide",), "wide_donated": ("wide", "donate"), "recompile": ("recompile",), "print": ("print",),
    "h2d": ("h2d",), "clean": ("clean",), "unannotated": ("unannotated",),
    "batchnorm_step": ("state_arguments", "batchnorm"), "token_step": ("state_arguments", "tokens"),
}


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    """Every program recorded in a process of its own, forked from one child that imported jax and
    flax once (plain_programs.record_each)."""
    folder = tmp_path_factory.mktemp("plain")
    out = {name: folder / name / "logs" for name in PLAIN}
    jobs = [{"args": [kind, str(out[name]), *flags],
             "xla_flags": "" if kind in TIMED else os.environ.get("XLA_FLAGS", "")}
            for name, (kind, *flags) in PLAIN.items()]
    proc = subprocess.run([sys.executable, str(PROGRAMS), "--each", json.dumps(jobs)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


def test_scan_without_remat_gets_both_scan_and_remat_findings(traces):
    doc = analyze_json(traces["scan"])
    assert {"scan-dynamic-update-slice", "missing-remat"} <= rule_ids(doc)
    # not our workload: no bundled config to change, but the advice is still concrete
    for f in doc["runs"][0]["findings"]:
        assert f["recommendation"]["config"] == {}
        assert f["recommendation"]["text"]


def test_scan_with_remat_is_silent(traces):
    # a float32 program: only the (CPU: info) float32 note remains
    assert rule_ids(analyze_json(traces["scan_remat"])) <= {"float32-activations"}


def test_unrolled_has_no_scan_finding(traces):
    ids = rule_ids(analyze_json(traces["unrolled"]))
    assert "scan-dynamic-update-slice" not in ids
    assert "missing-remat" in ids


def test_donation(traces):
    assert "missing-buffer-donation" in rule_ids(analyze_json(traces["wide"]))
    assert "missing-buffer-donation" not in rule_ids(analyze_json(traces["wide_donated"]))


@pytest.mark.parametrize("program, names", [
    ("batchnorm_step", '("params", "batch_stats", "opt_state")'),     # step(params, batch_stats, opt_state, x, y)
    ("token_step", '("params", "opt_state")'),                         # step(params, opt_state, tokens)
])
def test_donation_names_the_arguments_that_hold_the_state(traces, program, names):
    """The advice names the step's own arguments, from the names JAX gives the entry parameters, never
    a position guessed (it said donate_argnums=(0,) to both, leaving the optimizer state held twice)."""
    (f,) = [f for f in analyze_json(traces[program])["runs"][0]["findings"] if f["rule"] == "missing-buffer-donation"]
    assert f"donate_argnames={names}" in f["recommendation"]["text"]
    assert "donate_argnums" not in f["recommendation"]["text"]
    assert f["evidence"]["state_arguments"] == [n.strip('"() ') for n in names.split(",")]


def test_source_points_at_the_users_file(traces):
    doc = analyze_json(traces["scan"])
    sources = [f["source"] for f in doc["runs"][0]["findings"] if f["source"]]
    assert sources and all(s.split(":")[0].endswith("plain_programs.py") for s in sources)


HOST_RULES = {"recompilation", "host-bound", "host-device-transfer"}


@pytest.mark.parametrize("program, expected", [
    ("recompile", {"recompilation", "host-bound"}),
    ("print", {"host-bound"}),
    ("h2d", {"host-device-transfer", "host-bound"}),
    ("clean", set()),
    ("scan", set()),
])
def test_host_side_rules(traces, program, expected):
    assert rule_ids(analyze_json(traces[program])) & HOST_RULES == expected


def test_recompilation_names_the_function_and_its_compile_time(traces):
    doc = analyze_json(traces["recompile"])
    (f,) = [f for f in doc["runs"][0]["findings"] if f["rule"] == "recompilation"]
    # the step, not the slicing helper it calls, with what changed between its programs
    assert f["evidence"]["recompiled_function"] == "jit_fit"
    assert len(f["evidence"]["programs"]) >= 4
    assert any(c.startswith("x:") for c in f["evidence"]["changed"])
    assert f["evidence"]["compile_time_ms"] > 0
    assert f["source"].split(":")[0].endswith("plain_programs.py")


def test_host_bound_names_the_cause(traces):
    causes = {}
    for program in ("print", "h2d", "recompile"):
        (f,) = [f for f in analyze_json(traces[program])["runs"][0]["findings"] if f["rule"] == "host-bound"]
        causes[program] = f["evidence"]["likely_cause"]
    assert causes == {"print": "sync", "h2d": "transfer", "recompile": "compile"}


def test_transfer_finding_is_info_on_cpu(traces):
    doc = analyze_json(traces["h2d"])
    (f,) = [f for f in doc["runs"][0]["findings"] if f["rule"] == "host-device-transfer"]
    assert f["severity"] == ("info" if doc["runs"][0]["backend"] == "cpu" else "warning")
    assert f["evidence"]["copies_per_step"] > 0.5      # in most steps (a recording can lack one step's copy)


def test_steps_without_annotations_come_from_executions(traces):
    run = analyze_json(traces["unannotated"])["runs"][0]
    s = run["summary"]
    if run["backend"] != "cpu":
        return  # executions carry run ids on the CPU backend only
    assert s["steps"] == 3 and s["steps_from"] == "executions of the step program"
    assert s["step_time_ms"] > 0
    annotated = analyze_json(traces["clean"])["runs"][0]["summary"]
    assert annotated["steps_from"] == "step annotations"
