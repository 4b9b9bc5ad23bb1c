"""Terminal view of `advisor sweep`."""

from __future__ import annotations

from rich.console import Console

from . import layout
from .escape import terminal
from ..units import mib


def render(rows: list[dict], console: Console) -> None:
    cols = [layout.Col("config", wrap=True), layout.Col("step time", number=True), layout.Col("vs first", number=True),
            layout.Col("peak memory", number=True), layout.Col("vs first", number=True),
            layout.Col("findings", wrap=True)]
    cells = []
    for r in rows:
        if "error" in r:
            cells.append([terminal(r["config"]), "", "", "", "", terminal(r["error"], "red")])
            continue
        cells.append([
            terminal(r["config"]),
            f"{r['step_time_ms']:,.1f} ms (spread {r['step_time_spread']:.0%})",
            f"x{r['step_time_ratio']:.2f}" if r["step_time_ratio"] else "n/a",
            mib(r["peak_memory_bytes"]) if r["peak_memory_bytes"] else "n/a",
            f"x{r['peak_memory_ratio']:.2f}" if r["peak_memory_ratio"] else "n/a",
            terminal(", ".join(r["findings"]) or "none"),
        ])
    layout.table(console, None, cols, cells)
