"""`run-workload --verify`, the pre-flight memory check, and `advisor sweep`."""

import json

from conftest import cli
from test_json_schema import validate


def test_verify_measures_each_change(tmp_path, least_timing):
    proc = cli("run-workload", "transformer", "--steps", "2", "--verify", "--logdir", tmp_path,
                   "--select", "missing-remat", "--select", "scan-dynamic-update-slice", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    findings = {f["rule"]: f for f in json.loads(proc.stdout)["runs"][0]["findings"]}
    remat = findings["missing-remat"]["verified"]
    assert remat["change"] == {"model.remat": ["MLP", "Attn"]}
    assert remat["promised"] == "peak_memory" and remat["improved"] is True
    assert remat["peak_memory_ratio"] < 0.6
    assert remat["loss_match"] is True and remat["bug"] is False
    rec = findings["missing-remat"]["recommendation"]
    assert rec["checked"] == "measured" and "re-run with --set model.remat=MLP+Attn" in rec["check"]
    # the checked line's figures are the record's, as the table prints them
    assert f"(x{remat['step_time_ratio']:.2f}, noise {remat['step_time_noise']:.0%})" in rec["check"]
    # step time from the paired engine: a ratio with its band and noise, from interleaved rounds
    assert remat["step_time"]["method"] == "interleaved" and remat["step_time"]["rounds"] >= 8
    low, high = remat["step_time"]["band"]
    assert low <= remat["step_time_ratio"] <= high
    # the rule offers two fixes (unroll, or remat inside the scan): both measured, the best one kept
    scan = findings["scan-dynamic-update-slice"]["verified"]
    tried = [scan, *scan["alternatives"]]
    assert {"model.scan_layers": False} in [t["change"] for t in tried]
    assert {"model.remat": ["MLP", "Attn"]} in [t["change"] for t in tried]
    assert scan["step_time_ratio"] <= min(t["step_time_ratio"] for t in tried)
    assert findings["scan-dynamic-update-slice"]["recommendation"]["config"] == scan["change"]
    # unrolling must compute the same function: same loss on the same parameters
    unroll = next(t for t in tried if t["change"] == {"model.scan_layers": False})
    assert unroll["loss_match"] is True and unroll["numerics"] == "same function"
    assert isinstance(unroll["improved"], bool) and unroll["step_time_ratio"] > 0
    # ranked by what was measured: the first finding measured is the one that measured fastest
    measured = [f["verified"] for f in json.loads(proc.stdout)["runs"][0]["findings"] if f.get("verified")]
    assert measured[0]["step_time_ratio"] == min(m["step_time_ratio"] for m in measured)


def test_ranking_follows_the_measurement():
    """rank_measured: a change measured faster goes first and is at least a warning; one measured
    slower (that brought no memory) goes last, as info."""
    from advisor.findings import Expected, Finding, Recommendation
    from advisor.verification import rank_measured

    def finding(rule, severity, ratio, band, verdict, memory=False):
        rec = Recommendation("fix", Expected("step_time", 1.0, "ms", ""), "cost", config={"model.x": rule})
        f = Finding(rule, severity, rule, {}, rec, impact=0.5)
        f.verified = {"change": rec.config, "step_time_ratio": ratio, "peak_memory_ratio": None,
                      "memory_improved": memory,
                      "step_time": {"ratio": ratio, "band": band, "noise": 0.03, "verdict": verdict}}
        return f

    slow = finding("slow", "warning", 1.13, [1.1, 1.16], "slower")
    fast = finding("fast", "info", 0.75, [0.72, 0.78], "faster")
    unmeasured = Finding("plain", "warning", "plain", {},
                         Recommendation("x", Expected("step_time", None, "ms", ""), "c"), 0.9)
    findings = [slow, unmeasured, fast]
    rank_measured(findings)
    assert [f.rule for f in findings] == ["fast", "plain", "slow"]
    assert fast.severity == "warning" and slow.severity == "info"


def test_preflight_turns_a_step_that_does_not_fit_into_a_finding(tmp_path):
    proc = cli("run-workload", "transformer", "--memory-limit", "50MB", "--logdir", tmp_path, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    (run,) = json.loads(proc.stdout)["runs"]
    (f,) = run["findings"]
    assert f["rule"] == "out-of-memory" and f["severity"] == "error"
    ev = f["evidence"]
    assert ev["required_bytes"] > ev["capacity_bytes"] == 50_000_000 and ev["at_run_time"] is False
    fits = [c for c in ev["candidates"] if c["fits"]]
    assert {"model.remat": ["MLP", "Attn"]} in [c["change"] for c in fits]
    assert all(c["estimated_bytes"] <= ev["capacity_bytes"] for c in fits)
    assert not list(tmp_path.rglob("*.xplane.pb")), "a step that does not fit must not run"


def test_sweep_compares_rows(tmp_path, least_timing):
    proc = cli("sweep", "transformer", "--vary", "model.remat=none,MLP+Attn", "--steps", "2",
                   "--logdir", tmp_path, "--format", "json")
    doc = validate("sweep", proc)
    rows = doc["rows"]
    assert [r["config"] for r in rows] == ["model.remat=none", "model.remat=MLP+Attn"]
    assert rows[0]["peak_memory_ratio"] == 1.0 and rows[1]["peak_memory_ratio"] < 0.6
    assert "missing-remat" in rows[0]["findings"] and "missing-remat" not in rows[1]["findings"]
    # analyzed afterwards, each run names what the sweep varied, the default row (remat=none) too
    heads = [line for line in cli("analyze", tmp_path).stdout.splitlines() if line.startswith("workload ")]
    assert len(heads) == 2 and any("model.remat=none" in h for h in heads), heads
    assert any("model.remat=MLP+Attn" in h for h in heads), heads


def test_sweep_refuses_bad_values_before_running(tmp_path):
    proc = cli("sweep", "transformer", "--vary", "model.remat=MLP+Everything", "--logdir", tmp_path)
    assert proc.returncode == 2 and "bad value for model.remat" in proc.stderr
    assert not tmp_path.exists() or not list(tmp_path.rglob("*.xplane.pb"))


def test_the_checked_line_and_the_verified_table_round_the_noise_once():
    """--verify printed "x1.25, noise 13%" in the checked line (from the noise as measured, 0.12503)
    and "noise 12%" in its table (from the record's 0.125): both print the record's figures."""
    import io

    from advisor.report import layout, text
    from advisor.verification import _measured
    from conftest import FIXTURES, analyze_json

    doc = analyze_json(FIXTURES / "transformer_scan")["runs"][0]
    finding = doc["findings"][0]
    finding["verified"] = {
        "change": {"model.remat": ["MLP", "Attn"]}, "promised": "step_time", "improved": False,
        "step_time_ms": [100.0, 125.0], "step_time_ratio": 1.25, "step_time_noise": round(0.12503, 4),
        "peak_memory_bytes": [40 << 20, 30 << 20], "peak_memory_ratio": 0.75, "compiled_required_bytes": [None, None],
        "numerics": "same function", "initial_loss": [6.2, 6.2], "loss_match": True, "bug": False}
    line = _measured(finding["verified"])
    finding["recommendation"].update(checked="measured", check=f"re-run with --set model.remat=MLP+Attn: {line}")
    out = io.StringIO()
    text.render([{"run": doc}], layout.console(out, terminal=False, width=200))
    printed = out.getvalue()
    assert "(x1.25, noise 12%)" in line and "noise 13%" not in printed
    table = printed[printed.index("verified: each change applied alone"):]
    assert "100.0 -> 125.0 ms (x1.25, noise 12%)" in table
