"""Which rules could run on a run (`runs[].rules`), in words: a report on a trace that most rules could
not read says which and why, never that no rule saw a problem."""

from __future__ import annotations

from typing import Optional

NO_RULE_RAN = "No rule ran (the rules selected, less those ignored, left none): nothing was checked."


def summary(doc: dict) -> Optional[tuple[str, list[tuple[str, list[str]]], str]]:
    """(headline, [(what the trace lacks, rule ids)], which ran) when a rule could not run and the
    report must say so: the run has no findings, or most rules could not run; else None."""
    rules = doc.get("rules") or {}
    ran, lacking = rules.get("ran", []), rules.get("could_not_run", [])
    found = bool(doc.get("findings"))
    most = len(lacking) > len(ran)
    if not lacking or (found and not most):
        return None
    total, backend = len(ran) + len(lacking), doc.get("backend", "")
    if most:
        head = f"{len(lacking)} of the {total} rules for {backend} could not run on this trace"
        head = head if found else f"No findings, but {head[0].lower()}{head[1:]}"
    else:
        head = f"No findings from the {len(ran)} rules that ran; {len(lacking)} could not"
    by_why: dict[str, list[str]] = {}
    for item in lacking:        # by the first thing the rule lacks (the JSON lists them all)
        by_why.setdefault(item["why"].split("; ")[0], []).append(item["rule"])
    ran_line = ""
    if most:
        ran_line = f"ran: {', '.join(ran)}" + ("" if found else " (no problem seen)") if ran else "no rule ran"
    return head, list(by_why.items()), ran_line
