"""What CI systems show natively: JUnit XML, SARIF 2.1.0, GitHub annotations and step summaries."""

from __future__ import annotations

import os
import urllib.parse
import xml.etree.ElementTree as ET
from pathlib import Path

from .. import safe_json
from ..outputs import atomic_open, write_text
from ..version import __version__
from . import escape

_SARIF_LEVEL = {"error": "error", "warning": "warning", "info": "note"}


def junit(result, path: Path) -> None:
    """One test case per rule and per budget."""
    failures = sum(not c.passed for c in result.checks)
    suite = ET.Element("testsuite", name="advisor check", tests=str(len(result.checks)),
                       failures=str(failures), errors="0")
    for c in result.checks:
        name, message = escape.xml(c.name), escape.xml(c.message)
        case = ET.SubElement(suite, "testcase", classname="advisor." + name.split(":")[0], name=name)
        if not c.passed:
            ET.SubElement(case, "failure", message=message, type=name.split(":")[0]).text = message
        else:
            ET.SubElement(case, "system-out").text = message
    root = ET.Element("testsuites", name="advisor", tests=suite.get("tests"), failures=suite.get("failures"))
    root.append(suite)
    with atomic_open(path, "wb") as fh:
        ET.ElementTree(root).write(fh, encoding="utf-8", xml_declaration=True)


def _location(source: str | None) -> list[dict]:
    if not source or ":" not in source:
        return []
    file, line = source.rsplit(":", 1)
    try:
        uri = urllib.parse.quote(Path(file).resolve().relative_to(Path.cwd().resolve()).as_posix(),
                                 errors="surrogateescape")
    except (ValueError, OSError):
        # a URI reference either way: the characters a file name may hold percent-encoded
        uri = ("file://" if file.startswith("/") else "") + urllib.parse.quote(file, errors="surrogateescape")
    region = {"startLine": int(line)} if line.isdigit() and int(line) > 0 else {}
    loc = {"artifactLocation": {"uri": uri}}
    if region:
        loc["region"] = region
    return [{"physicalLocation": loc}]


def sarif(result, rules, path: Path) -> dict:
    """SARIF 2.1.0: the run's findings, and the budgets that failed, as results."""
    rule_docs = [{
        "id": r.id,
        "name": r.id,
        "shortDescription": {"text": r.summary},
        "fullDescription": {"text": r.doc.strip().splitlines()[0]},
        "help": {"text": r.doc.strip(), "markdown": r.doc.strip()},
        "defaultConfiguration": {"level": _SARIF_LEVEL[r.severity]},
        "properties": {"backends": list(r.backends)},
    } for r in rules]
    for budget in ("budget:step-time", "budget:peak-memory"):
        rule_docs.append({"id": budget, "name": budget,
                          "shortDescription": {"text": f"{budget.split(':')[1]} regression against the baseline"},
                          "defaultConfiguration": {"level": "error"}})
    results = []
    for f in result.document["run"]["findings"]:
        rec = f["recommendation"]
        results.append({
            "ruleId": f["rule"],
            "level": _SARIF_LEVEL[f["severity"]],
            "message": {"text": escape.sarif_text(f"{f['title']}. Fix: {rec['text']}. "
                                                  f"Expected: {rec['expected']['text']}.")},
            "locations": _location(f.get("source")),
        })
    for c in result.checks:
        if c.name.startswith("budget:") and not c.passed:
            results.append({"ruleId": c.name, "level": "error", "message": {"text": escape.sarif_text(c.message)},
                            "locations": _location(c.source)})     # the op that grew most, where known
    doc = {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": "advisor", "version": __version__, "rules": rule_docs}},
            "results": results,
        }],
    }
    write_text(path, safe_json.dumps(doc, indent=2) + "\n")
    return doc


def markdown(result) -> str:
    verdict = "passed" if result.passed else "FAILED"
    lines = [f"### advisor check {verdict}", "", "| check | result | details |", "| --- | --- | --- |"]
    for c in result.checks:
        not_judged = c.level == "warning" and c.name.startswith("budget:")
        mark = "**fail**" if not c.passed else "warn" if not_judged else "pass"
        lines.append(f"| {escape.markdown_code(c.name)} | {mark} | {escape.markdown(c.message)} |")
    return "\n".join(lines) + "\n"


def github(result) -> None:
    """Annotations and the step summary, when running under GitHub Actions."""
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        with open(summary, "a", encoding="utf-8") as fh:
            fh.write(markdown(result))
    if os.environ.get("GITHUB_ACTIONS") != "true":
        return
    for c in result.checks:
        if c.passed and c.level not in ("warning", "notice"):
            continue
        kind = "error" if not c.passed else c.level     # an info finding is a notice, not a warning
        props = []
        if c.source and ":" in c.source:
            file, line = c.source.rsplit(":", 1)
            props += [f"file={escape.gh_property(file)}"] + ([f"line={line}"] if line.isdigit() else [])
        props.append(f"title={escape.gh_property('advisor ' + c.name)}")
        print(f"::{kind} {','.join(props)}::{escape.gh_data(c.message)}")
