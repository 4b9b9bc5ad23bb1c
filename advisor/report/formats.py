"""Every command's report in the format asked: the one list of output formats (`FORMATS`), each with
the commands that offer it and how it renders each one's report. The command line's `--format`
choices (advisor/cli.py), `advisor.Report`'s `to_text`/`to_json`/`to_html` (advisor/api.py) and
`write` read it. A report is written on stdout, or into the file given (written whole, atomically).

The runs' report (analyze, run-workload: the runs' result documents, and the runs that failed) is
text (laid out on a terminal, plain lines anywhere else or into a file), JSON, JSON lines (each run
as soon as it and the runs before it are done) or HTML; compare, check, sweep, tune, rules and
explain render what their command gives them.
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any, Callable, Iterable, Optional

import click

from ..errors import AdvisorError
from ..outputs import atomic_open, write_text
from . import layout
from .escape import github_commands_off

Note = Callable[[str], None]      # a line for the user (on stderr)


@dataclasses.dataclass(frozen=True)
class Runs:
    """The report of analyze and run-workload: the runs' result documents, and the runs that could not
    be read (anything that is not a document: its to_json() is {"path", "reason"}), in the order of
    their paths."""
    results: Iterable
    read_from: str
    command: str = "analyze"


@dataclasses.dataclass(frozen=True)
class Compared:
    results: list                   # [(name, compare.Comparison)]
    base: str
    new: str
    pairs: list                     # [(name, base document, new document)]: their warnings


@dataclasses.dataclass(frozen=True)
class Checked:
    result: Any                     # check.Result
    inputs: list[str]


@dataclasses.dataclass(frozen=True)
class Swept:
    rows: list[dict]
    workload: str
    preset: str


# ---- the runs' report -------------------------------------------------------------------------

def _split(results: Iterable) -> tuple[list[dict], list[dict]]:
    documents, failed = [], []
    for result in results:
        if isinstance(result, dict):
            documents.append(result)
        else:
            failed.append(result.to_json())
    return documents, failed


def runs_text(documents: list[dict], failed: list[dict], read_from: str, command: str) -> str:
    from .text import render_plain
    return render_plain(documents, failed, read_from)


def runs_json(documents: list[dict], failed: list[dict], read_from: str, command: str) -> str:
    from .json_report import render
    return render(documents, read_from, command, failed=failed)


def runs_html(documents: list[dict], failed: list[dict], read_from: str, command: str) -> str:
    from .html import render_report
    return render_report(documents, read_from, command, failed)


def _runs_text(report: Runs, output, note: Note) -> list[dict]:
    documents, failed = _split(report.results)
    if output:
        with atomic_open(output) as fh:
            fh.write(runs_text(documents, failed, report.read_from, report.command))
        note(f"advisor: report written to {output}")
    else:
        from .text import render
        with github_commands_off():
            render(documents, layout.console(), failed, report.read_from)
    return failed


def _runs(to_text: Callable[[list[dict], list[dict], str, str], str]) -> Callable[[Runs, Any, Note], list[dict]]:
    def write(report: Runs, output, note: Note) -> list[dict]:
        documents, failed = _split(report.results)
        write_text_or_echo(output, to_text(documents, failed, report.read_from, report.command), note)
        return failed
    return write


def _runs_jsonl(report: Runs, output, note: Note) -> list[dict]:
    """Each run's line as soon as it is done."""
    from .json_report import jsonl_line

    failed = []
    with (atomic_open(output) if output else contextlib.nullcontext(None)) as fh:
        for result in report.results:
            item = result if isinstance(result, dict) else result.to_json()
            if not isinstance(result, dict):
                failed.append(item)
            click.echo(jsonl_line(item, report.read_from, report.command), file=fh)
    if output:
        note(f"advisor: report written to {output}")
    return failed


# ---- the other commands' reports --------------------------------------------------------------

def _echo_json(command: str, inputs: list[str], data: dict, warnings: Iterable[str] = ()) -> None:
    from .json_report import dumps, envelope
    click.echo(dumps(envelope(command, inputs, data, warnings)))


def _on_terminal(render: Callable) -> Callable[[Any, Any, Note], None]:
    def write(report, output, note: Note) -> None:
        with github_commands_off():
            render(report, layout.console())
    return write


def _compare_text(report: Compared, console) -> None:
    from .compare_text import render
    render(report.results, console)


def _compare_json(report: Compared, output, note: Note) -> None:
    warnings = [w for _, b, n in report.pairs for d in (b, n) for w in d["run"]["warnings"]]
    _echo_json("compare", [report.base, report.new],
               {"pairs": [{"name": name, **c.to_json()} for name, c in report.results]}, warnings)


def _compare_html(report: Compared, output, note: Note) -> None:
    from .html import render_compare
    write_text_or_echo(output, render_compare(report.results, str(report.base), str(report.new)), note)


def _check_text(report: Checked, console) -> None:
    from .check_text import render
    render(report.result, console)


def _check_json(report: Checked, output, note: Note) -> None:
    result = report.result
    warnings = list(result.document["run"]["warnings"])
    warnings += [c.message for c in result.checks if c.passed and c.message.startswith("step time not judged")]
    _echo_json("check", report.inputs, {"check": result.to_json()}, warnings)


def _sweep_text(report: Swept, output, note: Note) -> None:
    from .sweep_text import render
    render(report.rows, layout.console())


def _sweep_json(report: Swept, output, note: Note) -> None:
    _echo_json("sweep", [f"{report.workload} ({report.preset})"],
               {"workload": report.workload, "preset": report.preset, "rows": report.rows})


def _tune_text(doc: dict, output, note: Note) -> None:
    from .tune_text import render
    render(doc, layout.console())


def _tune_json(doc: dict, output, note: Note) -> None:
    _echo_json("tune", [f"{doc['workload']} ({doc['preset']})"], doc)


def _rules_text(rules: list, output, note: Note) -> None:
    cols = [layout.Col("rule"), layout.Col("severity", wrap=True), layout.Col("backends"),
            layout.Col("detects", wrap=True)]
    layout.entries(layout.console(), cols,
                   [(rule.id, rule.severity_text, ", ".join(rule.backends), rule.summary) for rule in rules])


def _rules_json(rules: list, output, note: Note) -> None:
    _echo_json("rules", [], {"rules": [
        {"id": r.id, "severity": r.severity, "escalation": r.escalation, "backends": list(r.backends),
         "summary": r.summary, "options": {k: v for k, v in r.options.items()}} for r in rules]})


def _explain_text(rule, output, note: Note) -> None:
    import sys

    from rich.console import Console

    from .explain_text import render
    render(rule.doc, Console(highlight=False), sys.stdout.isatty())


def _explain_json(rule, output, note: Note) -> None:
    _echo_json("explain", [rule.id], {"rule": {
        "id": rule.id, "severity": rule.severity, "escalation": rule.escalation, "backends": list(rule.backends),
        "summary": rule.summary, "options": dict(rule.options), "doc": rule.doc.strip()}})


# ---- the one list ------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Format:
    name: str
    # {command that offers it: its renderer, renderer(report, output file or None, note)}
    commands: dict[str, Callable[[Any, Any, Note], Any]]
    runs: Optional[Callable[[list[dict], list[dict], str, str], str]] = None   # the runs' report as one text
    needs_output: bool = False      # written to a file only (--output)


FORMATS: tuple[Format, ...] = (
    Format("text", {"analyze": _runs_text, "run-workload": _runs_text,
                    "compare": _on_terminal(_compare_text), "check": _on_terminal(_check_text),
                    "sweep": _sweep_text, "tune": _tune_text, "rules": _rules_text, "explain": _explain_text},
           runs=runs_text),
    Format("json", {"analyze": _runs(runs_json), "run-workload": _runs(runs_json), "compare": _compare_json,
                    "check": _check_json, "sweep": _sweep_json, "tune": _tune_json, "rules": _rules_json,
                    "explain": _explain_json},
           runs=runs_json),
    Format("jsonl", {"analyze": _runs_jsonl}),
    Format("html", {"analyze": _runs(runs_html), "run-workload": _runs(runs_html), "compare": _compare_html},
           runs=runs_html, needs_output=True),
)
BY_NAME = {f.name: f for f in FORMATS}


def names(command: str) -> list[str]:
    """The formats `command` offers, in the list's order: its --format choices."""
    return [f.name for f in FORMATS if command in f.commands]


def check_output(fmt: str, output) -> None:
    if BY_NAME[fmt].needs_output and not output:
        raise AdvisorError(f"--format {fmt} writes a file: give --output FILE (e.g. --output report.{fmt})")


def write(fmt: str, command: str, report, output=None, note: Note = lambda line: None):
    """`command`'s report in the format `fmt`, on stdout or into `output`; the runs' report returns the
    runs that failed, {"path", "reason"}."""
    return BY_NAME[fmt].commands[command](report, output, note)


def write_text_or_echo(output, text: str, note: Note) -> None:
    """A whole report into the file given (ending with a newline), or on stdout."""
    if output:
        write_text(output, text if text.endswith("\n") else text + "\n")
        note(f"advisor: report written to {output}")
    else:
        click.echo(text)
