"""Terminal view of `advisor check`."""

from __future__ import annotations

from rich.console import Console


def render(result, console: Console) -> None:
    for c in result.checks:
        if c.passed and c.message == "no finding":
            continue
        if not c.passed:
            mark = "[bold red]FAIL[/bold red]"
        elif c.level == "warning" and c.name.startswith("budget:"):
            mark = "[yellow]WARN[/yellow]"   # passed, but not judged: say so
        else:
            mark = "[green]pass[/green]"
        where = f" ({c.source})" if c.source else ""
        console.print(f"{mark}  {c.name}: {c.message}{where}")
    quiet = sum(1 for c in result.checks if c.passed and c.message == "no finding")
    if quiet:
        console.print(f"[green]pass[/green]  {quiet} other rules: no finding")
    verdict = "[green]advisor check passed[/green]" if result.passed else "[bold red]advisor check failed[/bold red]"
    console.print(verdict)
