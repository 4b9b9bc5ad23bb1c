"""Terminal view of `advisor check`."""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from .escape import terminal


def render(result, console: Console) -> None:
    for c in result.checks:
        if c.passed and c.message == "no finding":
            continue
        if not c.passed:
            mark = ("FAIL", "bold red")
        elif c.level == "warning" and c.name.startswith("budget:"):
            mark = ("WARN", "yellow")   # passed, but not judged: say so
        else:
            mark = ("pass", "green")
        where = f" ({c.source})" if c.source and not c.name.startswith("budget:") else ""  # a budget names it in words
        console.print(Text.assemble(mark, terminal(f"  {c.name}: {c.message}{where}")))
    quiet = sum(1 for c in result.checks if c.passed and c.message == "no finding")
    if quiet:
        console.print(Text.assemble(("pass", "green"), f"  {quiet} other rules: no finding"))
    console.print(Text("advisor check passed", style="green") if result.passed
                  else Text("advisor check failed", style="bold red"))
