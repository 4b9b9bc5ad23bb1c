"""The pre-merge check: a run against a baseline file, with budgets and a pass/fail verdict."""

from __future__ import annotations

import dataclasses
import datetime
import json
from pathlib import Path
from typing import Any, Optional

from . import __version__
from .compare import Comparison, Metrics, compare, metrics
from .engine import Analysis
from .errors import AdvisorError
from .findings import SEVERITIES

BASELINE_VERSION = 1


@dataclasses.dataclass
class Check:
    name: str           # "rule:<id>", "budget:step-time", "budget:peak-memory"
    passed: bool
    message: str
    level: str = "error"          # how CI should show a failure: "error" or "warning"
    source: Optional[str] = None  # file:line, for rule checks


@dataclasses.dataclass
class CheckResult:
    checks: list[Check]
    comparison: Optional[Comparison]
    analysis: Analysis

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)

    def to_json(self) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "checks": [dataclasses.asdict(c) for c in self.checks],
            "comparison": self.comparison.to_json() if self.comparison else None,
            "run": self.analysis.to_json(),
        }


def save_baseline(path: Path, analysis: Analysis, workload: Optional[dict] = None) -> None:
    doc = {
        "schema_version": BASELINE_VERSION,
        "advisor_version": __version__,
        "created": datetime.datetime.now().isoformat(timespec="seconds"),
        "trace": analysis.profile.path,
        "workload": workload,
        "metrics": metrics(analysis).to_json(),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(doc, indent=2) + "\n")
    tmp.replace(path)   # never leave a half-written baseline behind


def read_baseline(path: Path) -> Metrics:
    if not path.is_file():
        raise AdvisorError(f"{path}: no such baseline; create it with `advisor check ... --write-baseline {path}`")
    try:
        doc = json.loads(path.read_text())
        return Metrics.from_json(doc["metrics"])
    except (ValueError, KeyError, TypeError) as err:
        raise AdvisorError(f"{path}: not an advisor baseline ({type(err).__name__}: {err}); "
                           "write it again with --write-baseline") from None


def run_check(analysis: Analysis, baseline: Optional[Metrics], fail_on: str,
              max_step_time_regression: float, max_memory_regression: float, rule_ids: list[str]) -> CheckResult:
    new = metrics(analysis)
    comparison = None
    if baseline is not None:
        if (baseline.backend, baseline.device) != (new.backend, new.device):
            raise AdvisorError(
                f"the baseline was measured on {baseline.backend} ({baseline.device}) and this run on "
                f"{new.backend} ({new.device}): comparing them would mislead; write a baseline on this kind "
                "of machine with --write-baseline")
        comparison = compare(baseline, new)
    checks = []
    threshold = SEVERITIES.index(fail_on)
    by_rule = {}
    for f in analysis.findings:
        by_rule.setdefault(f.rule, []).append(f)
    for rule in rule_ids:
        found = by_rule.get(rule, [])
        worst = max(found, key=lambda f: SEVERITIES.index(f.severity), default=None)
        is_new = comparison is not None and rule in comparison.findings_added
        too_severe = worst is not None and SEVERITIES.index(worst.severity) >= threshold
        if worst is None:
            checks.append(Check(f"rule:{rule}", True, "no finding"))
        elif too_severe or is_new:
            why = "new since the baseline" if is_new else f"severity {worst.severity} >= --fail-on {fail_on}"
            checks.append(Check(f"rule:{rule}", False, f"{worst.title} ({why})", "error", worst.source))
        else:
            checks.append(Check(f"rule:{rule}", True, f"{worst.severity}: {worst.title} (also in the baseline)",
                                "warning", worst.source))
    if comparison is not None:
        checks.append(_step_time_check(comparison, max_step_time_regression))
        checks.append(_memory_check(comparison, max_memory_regression))
    return CheckResult(checks=checks, comparison=comparison, analysis=analysis)


def _step_time_check(c: Comparison, threshold: float) -> Check:
    if c.step_time_ratio is None:
        return Check("budget:step-time", True, "step time unknown in one of the runs: not judged", "warning")
    text = (f"step time {c.base.step_time_ms:.2f} ms -> {c.new.step_time_ms:.2f} ms (x{c.step_time_ratio:.3f}; "
            f"budget +{threshold:.0%}, measured noise {c.noise:.0%})")
    return Check("budget:step-time", not c.step_time_regressed(threshold), text)


def _memory_check(c: Comparison, threshold: float) -> Check:
    if c.peak_memory_ratio is None:
        return Check("budget:peak-memory", True, "peak memory unknown in one of the runs: not judged", "warning")
    text = (f"peak memory {c.base.peak_memory_bytes / 2**20:.1f} MiB -> {c.new.peak_memory_bytes / 2**20:.1f} MiB "
            f"(x{c.peak_memory_ratio:.3f}; budget +{threshold:.0%})")
    return Check("budget:peak-memory", not c.memory_regressed(threshold), text)


def parse_percent(text: str, name: str) -> float:
    t = text.strip()
    try:
        return float(t[:-1]) / 100 if t.endswith("%") else float(t)
    except ValueError:
        raise AdvisorError(f"{name} expects a percentage like 10% or a fraction like 0.1, got {text!r}") from None
