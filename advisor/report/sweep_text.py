"""Terminal view of `advisor sweep`."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from .escape import terminal
from ..units import mib


def render(rows: list[dict], console: Console) -> None:
    table = Table("config", "step time", "vs first", "peak memory", "vs first", "findings")
    for r in rows:
        if "error" in r:
            table.add_row(terminal(r["config"]), "", "", "", "", terminal(r["error"], "red"))
            continue
        table.add_row(
            terminal(r["config"]),
            f"{r['step_time_ms']:.1f} ms (spread {r['step_time_spread']:.0%})",
            f"x{r['step_time_ratio']:.2f}" if r["step_time_ratio"] else "n/a",
            mib(r["peak_memory_bytes"]) if r["peak_memory_bytes"] else "n/a",
            f"x{r['peak_memory_ratio']:.2f}" if r["peak_memory_ratio"] else "n/a",
            terminal(", ".join(r["findings"]) or "none"),
        )
    console.print(table)
