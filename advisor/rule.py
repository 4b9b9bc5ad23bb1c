"""The rule interface: one module per rule under `rules/`, each defining `RULE`: a check that computes
the numbers, and its message (advisor/message.py) that turns them into the finding."""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any, Callable, Iterable, Optional

from .findings import Finding
from .message import Message
from .model import Profile
from .settings import device_capacity

# What a rule reads from the trace (Rule.needs), each with the test of a profile and what a trace
# without it lacks: a rule whose needs the trace does not meet could not run, and the report says so.
NEEDS: dict[str, tuple[Callable[[Profile], bool], str]] = {
    "hlo": (lambda p: p.modules.get(p.step_module or "") is not None, "no HLO of a step program in the trace"),
    "buffers": (lambda p: p.memory is not None and p.memory.peak_bytes > 0,
                "no buffer assignment of the step program"),
    "steps": (lambda p: bool(p.steps), "no steps in the trace (no step annotations)"),
    "two steps": (lambda p: len(p.steps) >= 2, "fewer than two steps"),
    "kernels": (lambda p: any(d.kernel_count for d in p.devices), "no device kernels in the trace"),
    "capacity": (lambda p: bool(device_capacity(p)),
                 "device memory capacity unknown (pass --device-memory)"),
}


@dataclasses.dataclass(frozen=True)
class Rule:
    id: str
    severity: str                   # default severity
    backends: tuple[str, ...]       # backends its advice holds for
    summary: str                    # one line
    check: Callable[..., Iterable[Finding]]   # check(profile, **options)
    doc: str                        # the rule module's docstring
    message: Optional[Message] = None   # what a finding says: title, fix, gain, cost (RULE.finding fills it)
    notes: Optional[Callable[[Profile], list[str]]] = None   # what the run's notes should say (e.g. warm-up)
    escalation: str = ""            # when a finding's severity rises above the default, e.g. "error when ..."
    needs: tuple[str, ...] = ()     # what it reads from the trace (keys of NEEDS)
    # options that set the views' setting of the same name too (advisor/views/bound.py): host-bound's
    # min_idle_share is the idle view's, so the efficiency verdict says host-bound exactly when it fires
    binds: tuple[str, ...] = ()
    # what the run's notes say, once every rule ran, when the trace lacks one of its needs: ((need, note),)
    unmet_notes: tuple[tuple[str, str], ...] = ()

    @property
    def severity_text(self) -> str:
        """The default severity, with when it rises: what tables print."""
        return f"{self.severity} ({self.escalation})" if self.escalation else self.severity

    @property
    def options(self) -> dict[str, Any]:
        """Thresholds the check takes as keyword arguments, with their defaults."""
        params = inspect.signature(self.check).parameters
        return {n: p.default for n, p in params.items() if p.default is not inspect.Parameter.empty}

    def finding(self, profile: Profile, *, message: Optional[Message] = None, **figures) -> Finding:
        """The finding the check found, from its figures: `message` (a variant) or the rule's fills it in."""
        return (message or self.message).finding(self, profile, **figures)

    def missing(self, profile: Profile) -> list[str]:
        """What the trace lacks that this rule reads ([] when it can run)."""
        return [NEEDS[n][1] for n in self.needs if not NEEDS[n][0](profile)]

    def notes_unmet(self, profile: Profile) -> list[str]:
        """The notes of `unmet_notes` whose need the trace does not meet."""
        return [note for need, note in self.unmet_notes if not NEEDS[need][0](profile)]

    def run(self, profile: Profile, options: dict[str, Any] | None = None) -> list[Finding]:
        if profile.backend not in self.backends:
            return []
        findings = list(self.check(profile, **(options or {})))
        for note in (self.notes(profile) if self.notes else []):
            if note not in profile.notes:
                profile.notes.append(note)
        return findings


def readers(rules: Iterable[Rule]) -> dict[str, list[str]]:
    """{what a rule may read (a key of NEEDS): the ids of `rules` that read it}: what the loader names
    when that part of the trace cannot be read, and the TensorBoard links open the memory viewer for."""
    rules = list(rules)
    return {need: [rule.id for rule in rules if need in rule.needs] for need in NEEDS}
