"""Terminal view of `advisor explain`: a rule's documentation."""

from __future__ import annotations

from rich.console import Console


def render(doc: str, console: Console, is_terminal: bool) -> None:
    """On a terminal, the Markdown rendered (headings, lists and code set off; no `##` or backticks);
    piped, the Markdown source as written, for a file or another tool. The text is the rule's own
    docstring, never text from a trace."""
    text = doc.strip()
    if not is_terminal:
        console.file.write(text + "\n")
        return
    from rich.markdown import Markdown

    console.print(Markdown(text, code_theme="ansi_dark", inline_code_theme="ansi_dark"))
