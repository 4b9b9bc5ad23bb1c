"""What a rule reports: a finding with its evidence and a recommendation."""

from __future__ import annotations

import dataclasses
from typing import Any, Optional

SEVERITIES = ("info", "warning", "error")
# What a recommendation's figures were checked against, weakest last: the variant compiled
# (its buffer assignment), the variant re-run and measured (--verify), or the trace alone.
CHECKED = ("measured", "compiled", "estimated")
ESTIMATED = "from this trace alone; not compiled or re-run"


@dataclasses.dataclass
class Expected:
    """The gain a recommendation should bring, measured from the trace."""
    metric: str          # "step_time" or "peak_memory"
    saving: Optional[float]   # in `unit`, per step for step_time; None where one trace cannot measure it
    unit: str            # "ms" or "bytes"
    text: str

    def to_json(self) -> dict:
        return {"metric": self.metric, "saving": self.saving, "unit": self.unit, "text": self.text}


@dataclasses.dataclass
class Recommendation:
    text: str
    expected: Expected
    cost: str
    config: dict[str, Any] = dataclasses.field(default_factory=dict)
    remedy: Any = None    # advisor.remedies.Remedy: the change recommended, typed; None where none applies
    checked: str = "estimated"   # one of CHECKED
    check: str = ESTIMATED       # what it was checked against, in words with the figures
    refuted: Optional[dict] = None   # {"config", "text"}: the change tried and refuted (then config is {})
    # other changes that fix the same thing, each {"config", "text", "cost"}: --verify measures every one
    # and makes the one that measured best the recommendation (the others stay here)
    alternatives: list[dict] = dataclasses.field(default_factory=list)

    def to_json(self) -> dict:
        out = {"text": self.text, "config": self.config, "expected": self.expected.to_json(), "cost": self.cost}
        out["remedy"] = self.remedy.to_json() if self.remedy is not None else None
        out["checked"] = self.checked
        out["check"] = self.check
        if self.refuted is not None:
            out["refuted"] = self.refuted
        if self.alternatives:
            out["alternatives"] = self.alternatives
        return out


@dataclasses.dataclass
class Finding:
    rule: str
    severity: str
    title: str
    evidence: dict[str, Any]
    recommendation: Recommendation
    impact: float                 # share (0..1) of step time or peak memory at stake; orders findings
    source: Optional[str] = None  # "file:line" in user code, where the trace attributes it
    verified: Optional[dict] = None   # set by `run-workload --verify`: the measured before/after

    def to_json(self) -> dict:
        out = {
            "rule": self.rule,
            "severity": self.severity,
            "title": self.title,
            "evidence": self.evidence,
            "recommendation": self.recommendation.to_json(),
            "impact": round(self.impact, 4),
            "source": self.source,
        }
        if self.verified is not None:
            out["verified"] = self.verified
        return out


def sort_key(finding: Finding) -> tuple:
    return (-SEVERITIES.index(finding.severity), -finding.impact, finding.rule)
