"""The JSON envelope every command's `--format json` output shares.

{"schema_version", "advisor_version", "command", "inputs", "warnings", <the command's data>}:
tools read the same header from every command, and `warnings` says what could not be read.
"""

from __future__ import annotations

import json
from typing import Any, Iterable

from .. import safe_json
from ..version import __version__

SCHEMA_VERSION = 3


def envelope(command: str, inputs: Iterable[str], data: dict[str, Any], warnings: Iterable[str] = ()) -> dict:
    doc = {
        "schema_version": SCHEMA_VERSION,
        "advisor_version": __version__,
        "command": command,
        "inputs": [str(i) for i in inputs],
        "warnings": list(warnings),
    }
    doc.update(data)
    return doc


def dumps(doc: dict, indent: int | None = 2) -> str:
    """Strict JSON: a NaN or an infinity (a figure that could not be computed) is written as null and
    named in the envelope's warnings."""
    try:
        return json.dumps(doc, indent=indent, default=str, allow_nan=False)
    except ValueError:
        found = safe_json.non_finite(doc)
        if "warnings" in doc and found:
            doc = {**doc, "warnings": list(doc["warnings"]) + [
                f"not a finite number, written as null: {where}" for where in found[:20]]}
        return safe_json.dumps(doc, indent=indent)


def render(documents: list[dict], read_from: str, command: str = "analyze", warnings: Iterable[str] = (),
           failed: Iterable[dict] = ()) -> str:
    """documents: the runs' result documents (Analysis.document()), of which the JSON is each `run`;
    failed: [{"path", "reason"}] of runs that could not be read."""
    docs = [d["run"] for d in documents]
    warnings = list(warnings) + [f"{w}" for d in docs for w in d.get("warnings", [])]
    failed = list(failed)
    warnings += [f"{f['path']}: not analyzed: {f['reason']}" for f in failed]
    return dumps(envelope(command, [read_from], {"runs": docs, "failed": failed}, warnings))


def jsonl_line(item: dict, read_from: str, command: str = "analyze") -> str:
    """One line of `--format jsonl`: the envelope around one run (item: its result document),
    {"run": doc, "failed": null}, or around one run that could not be read (item: {"path", "reason"}),
    {"run": null, "failed": {"path", "reason"}}."""
    if "reason" in item:
        doc = envelope(command, [read_from], {"run": None, "failed": item},
                       [f"{item['path']}: not analyzed: {item['reason']}"])
    else:
        run = item["run"]
        doc = envelope(command, [read_from], {"run": run, "failed": None}, run.get("warnings", []))
    return dumps(doc, indent=None)


SCHEMA_FILES = {"analyze": "analyze.json", "run-workload": "analyze.json", "compare": "compare.json",
                "check": "check.json", "sweep": "sweep.json", "tune": "tune.json", "rules": "rules.json",
                "explain": "explain.json"}


def schema(command: str) -> dict:
    """The JSON Schema (draft 2020-12) of `command`'s --format json output, shipped in advisor/schemas/."""
    from importlib import resources

    return json.loads(resources.files("advisor").joinpath("schemas", SCHEMA_FILES[command]).read_text())
