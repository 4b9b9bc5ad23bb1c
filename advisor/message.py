"""A rule's message as data: what the finding says, the fix, its gain and its cost, as templates.

A rule states its `Message` beside its check (ruff's shape: the message apart from the check); the
check computes the numbers and calls `RULE.finding(profile, evidence=..., impact=..., **fields)`,
and the message turns the fields into the finding. A template is a format string over the fields,
whose format spec may name a unit: `{share:pct}` (12.3%), `{time:ms}` (ns to 1.23 ms), `{bytes:mib}`,
`{bytes:size}`, `{count:flop}`, `{rate:si FLOP/s}`; any other spec is Python's (`{count:,.0f}`).

With a remedy (advisor/remedies.py), `bundled` is the fix as a bundled workload reads it, and
`advice()` gives its `--set` change; on the user's own code the remedy's Flax/JAX terms stand in
its place. `fix` reads that advice as `{advice}`.
"""

from __future__ import annotations

import dataclasses
import string
from typing import Any, Optional

from . import units
from .findings import Expected, Finding, Recommendation
from .model import Profile
from .remedies import Remedy, advice, buys

# A template's unit specs: the formatting every report uses (advisor/units.py).
UNITS = {"pct": units.pct, "ms": units.ms, "mib": units.mib, "size": units.size, "flop": units.flop}
# What a gain saves, and its unit in Expected: step time per step (the field in ns, the JSON in ms),
# or peak memory (bytes).
METRICS = {"step_time": "ms", "peak_memory": "bytes"}


class _Formatter(string.Formatter):
    def format_field(self, value: Any, spec: str) -> str:
        if spec in UNITS:
            return UNITS[spec](value)
        if spec.startswith("si "):
            return units.si(value, spec[3:])
        return super().format_field(value, spec)


_FORMAT = _Formatter()


def fill(template: str, fields: dict[str, Any]) -> str:
    """The template with the fields filled in."""
    return _FORMAT.vformat(template, (), fields)


@dataclasses.dataclass(frozen=True)
class Message:
    title: str                      # what is wrong, with the numbers
    gain: str                       # what the fix gains, in words
    cost: str                       # what it gives up
    fix: str = "{advice}"           # what to change
    bundled: Optional[str] = None   # with a remedy: the fix as a bundled workload reads it ({advice})
    metric: str = "step_time"       # a key of METRICS
    saving: Optional[str] = "saving"   # the field that holds the gain (ns per step or bytes); None: unmeasured
    buys: bool = False              # an info finding's fix says what the freed memory (the saving) would buy
    at_source: bool = True          # the user's terms name the source line

    def but(self, **changes) -> "Message":
        """A variant of this message (another wording of the same rule)."""
        return dataclasses.replace(self, **changes)

    def finding(self, rule, profile: Profile, *, evidence: dict, impact: float, severity: Optional[str] = None,
                source: Optional[str] = None, remedy: Optional[Remedy] = None,
                alternatives: Optional[list] = None, **fields) -> Finding:
        """The finding of `rule` (an advisor.rule.Rule) with these figures; severity None: the rule's."""
        severity = severity or rule.severity
        config: dict = {}
        if self.bundled is not None and remedy is not None:
            fields["advice"], config = advice(profile, remedy, fill(self.bundled, fields),
                                              source if self.at_source else None)
        saving = fields[self.saving] if self.saving else None
        text = fill(self.fix, fields)
        if self.buys and severity == "info":
            text += "; " + buys(profile, saving)
        unit = METRICS[self.metric]
        if unit == "ms" and saving is not None:
            saving = round(saving / 1e6, 3)
        recommendation = Recommendation(text=text,
                                        expected=Expected(self.metric, saving, unit, fill(self.gain, fields)),
                                        cost=fill(self.cost, fields), config=config, remedy=remedy,
                                        alternatives=list(alternatives or []))
        return Finding(rule=rule.id, severity=severity, title=fill(self.title, fields), evidence=evidence,
                       recommendation=recommendation, impact=impact, source=source)
