"""Terminal view of `advisor sweep`."""

from __future__ import annotations

from rich.console import Console

from ..units import mib
from . import layout
from .escape import terminal


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
            (f"x{r['step_time_ratio']:.2f}" + (f" ±{r['step_time_noise']:.0%}" if r.get("step_time_noise") is not None
                                               else "")) if r.get("step_time_ratio") else r.get("timing_error", "n/a"),
            mib(r["peak_memory_bytes"]) if r["peak_memory_bytes"] else "n/a",
            f"x{r['peak_memory_ratio']:.2f}" if r["peak_memory_ratio"] else "n/a",
            terminal(", ".join(r["findings"]) or "none"),
        ])
    layout.table(console, None, cols, cells)
    console.print(terminal("step time: each row's profiled median (spread); vs first: interleaved paired rounds "
                           "against the first row, the median ratio ± its noise bound (90% band)"))
