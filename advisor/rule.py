"""The rule interface: one module per rule under `rules/`, each defining `RULE`."""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any, Callable, Iterable, Optional

from .findings import Finding
from .model import Profile


@dataclasses.dataclass(frozen=True)
class Rule:
    id: str
    severity: str                   # default severity
    backends: tuple[str, ...]       # backends its advice holds for
    summary: str                    # one line
    check: Callable[..., Iterable[Finding]]   # check(profile, **options)
    doc: str                        # the rule module's docstring
    notes: Optional[Callable[[Profile], list[str]]] = None   # what the run's notes should say (e.g. warm-up)
    escalation: str = ""            # when a finding's severity rises above the default, e.g. "error when ..."

    @property
    def severity_text(self) -> str:
        """The default severity, with when it rises: what tables print."""
        return f"{self.severity} ({self.escalation})" if self.escalation else self.severity

    @property
    def options(self) -> dict[str, Any]:
        """Thresholds the check takes as keyword arguments, with their defaults."""
        params = inspect.signature(self.check).parameters
        return {n: p.default for n, p in params.items() if p.default is not inspect.Parameter.empty}

    def run(self, profile: Profile, options: dict[str, Any] | None = None) -> list[Finding]:
        if profile.backend not in self.backends:
            return []
        findings = list(self.check(profile, **(options or {})))
        for note in (self.notes(profile) if self.notes else []):
            if note not in profile.notes:
                profile.notes.append(note)
        return findings
