"""A command's report in the format asked, from the runs' result documents: text (laid out on a
terminal, plain lines anywhere else or into a file), JSON, JSON lines (each run as soon as it and
the runs before it are done) or HTML; on stdout, or into the file given (written whole, atomically).
"""

from __future__ import annotations

import contextlib
from typing import Callable, Iterable

import click

from ..outputs import atomic_open, write_text
from . import layout
from .escape import github_commands_off


def write(results: Iterable, fmt: str, output, read_from: str, command: str,
          note: Callable[[str], None]) -> list[dict]:
    """results: the runs' result documents, and RunFailure for the runs that could not be read (in the
    order of their paths); note: a line for the user (on stderr). Returns the failures, {"path", "reason"}.
    A result document is a dict; a failure is anything else with to_json() (the renderers never import
    the job)."""
    documents, failed = [], []
    if fmt == "jsonl":
        from .json_report import jsonl_line

        with (atomic_open(output) if output else contextlib.nullcontext(None)) as fh:
            for result in results:
                item = result if isinstance(result, dict) else result.to_json()
                if not isinstance(result, dict):
                    failed.append(item)
                click.echo(jsonl_line(item, read_from, command), file=fh)
        if output:
            note(f"advisor: report written to {output}")
        return failed
    for result in results:
        if isinstance(result, dict):
            documents.append(result)
        else:
            failed.append(result.to_json())
    if fmt == "html":
        from .html import render_report
        write_text_or_echo(output, render_report(documents, read_from, command, failed), note)
    elif fmt == "json":
        from .json_report import render
        write_text_or_echo(output, render(documents, read_from, command, failed=failed), note)
    elif output:
        from .text import render_plain
        with atomic_open(output) as fh:
            fh.write(render_plain(documents, failed, read_from))
        note(f"advisor: report written to {output}")
    else:
        from .text import render
        with github_commands_off():
            render(documents, layout.console(), failed, read_from)
    return failed


def write_text_or_echo(output, text: str, note: Callable[[str], None]) -> None:
    """A whole report into the file given (ending with a newline), or on stdout."""
    if output:
        write_text(output, text if text.endswith("\n") else text + "\n")
        note(f"advisor: report written to {output}")
    else:
        click.echo(text)
