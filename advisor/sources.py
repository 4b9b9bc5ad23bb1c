"""Source lines as a user finds them: advisor's own files (the bundled workloads, the runner) by
their package path, `advisor/workloads/transformer.py:92`, not by where one install put them
(a site-packages folder, or the clone's top-level `workloads/`, installed as advisor.workloads)."""

from __future__ import annotations

import functools
import re
from pathlib import Path

# .../site-packages/advisor/..., wherever advisor is installed (never a user's file)
_INSTALLED = re.compile(r"^.*/(?:site|dist)-packages/(advisor/\S+\.py)(?=:)")
# a clone's or editable install's files; only in a run advisor recorded (advisor_run.json names a
# bundled workload), where no frame is the user's
_CLONE = re.compile(r"^.*?/(advisor|workloads|rules)/(\w+\.py)(?=:)")
_PACKAGE = {"advisor": "advisor", "workloads": "advisor/workloads", "rules": "advisor/rules"}


@functools.lru_cache(maxsize=1)
def _modules() -> dict[str, frozenset[str]]:
    """The file names of advisor's packages, by the clone's folder that holds them (found, not imported:
    the rules and workloads import what imports this)."""
    from importlib.util import find_spec

    names = lambda package: frozenset(p.name for p in Path(find_spec(package).origin).parent.glob("*.py"))  # noqa: E731
    return {"advisor": names("advisor"), "workloads": names("advisor.workloads"), "rules": names("advisor.rules")}


def shown(text: str, recorded_by_advisor: bool) -> str:
    """`FILE:LINE[ FUNCTION]` with advisor's own FILE by its package path; anything else unchanged."""
    out = _INSTALLED.sub(r"\1", text, count=1)
    if out != text or not recorded_by_advisor:
        return out
    m = _CLONE.match(text)
    if m and m.group(2) in _modules()[m.group(1)]:
        return f"{_PACKAGE[m.group(1)]}/{m.group(2)}{text[m.end():]}"
    return text


def shorten(findings, run_metadata: dict) -> None:
    """The findings' sources, in place (the summary's memory sites are shown so by the summary view)."""
    ours = bool(isinstance(run_metadata, dict) and run_metadata.get("workload"))
    for f in findings:
        if not f.source:
            continue
        new = shown(f.source, ours)
        if new != f.source:      # the same file named in the finding's words too ("(at FILE:LINE)")
            old_file, new_file = f.source.rsplit(":", 1)[0], new.rsplit(":", 1)[0]
            f.title = f.title.replace(old_file, new_file)
            f.recommendation.text = f.recommendation.text.replace(old_file, new_file)
            f.source = new
