"""Terminal view of `advisor compare`."""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from . import layout
from .escape import terminal
from ..units import mib


def _ratio(x) -> str:
    return f"x{x:.3f}" if x is not None else "n/a"


def _pct(x) -> str:
    return f"{x:.1%}" if x is not None else "unknown"


def render(results, console: Console) -> None:
    for name, c in results:
        if name:
            console.print(terminal(name, "bold"))
        for line in c.runs_text():
            console.print(terminal(line))
        b, n = c.base, c.new
        rows = [["step time (median)", f"{b.step_time_ms or 0:,.2f} ms", f"{n.step_time_ms or 0:,.2f} ms",
                 f"{_ratio(c.step_time_ratio)} (noise {c.noise:.0%})"]]
        if b.peak_memory_bytes is not None and n.peak_memory_bytes is not None:
            rows.append(["peak memory", mib(b.peak_memory_bytes), mib(n.peak_memory_bytes), _ratio(c.peak_memory_ratio)])
        if b.mfu is not None or n.mfu is not None:
            rows.append(["MFU", _pct(b.mfu), _pct(n.mfu), _ratio(c.mfu_ratio)])
        for cat, ratio in c.category_ratios.items():
            rows.append([terminal(f"op time per step: {cat}"), f"{b.category_ms_per_step.get(cat, 0):,.2f} ms",
                         f"{n.category_ms_per_step.get(cat, 0):,.2f} ms", _ratio(ratio)])
        layout.table(console, None, [layout.Col("metric", wrap=True), layout.Col("base", number=True),
                                     layout.Col("new", number=True), layout.Col("ratio", number=True)], rows)
        if c.mfu_peaks():
            console.print(terminal("MFU against " + c.mfu_peaks(), "dim"))
        console.print(c.step_time_verdict())
        for rule in c.findings_added:
            console.print(Text.assemble(terminal(f"+ {rule}", "yellow"), terminal(f": {n.titles.get(rule, '')}")))
        for rule in c.findings_removed:
            console.print(Text.assemble(terminal(f"- {rule}", "green"), terminal(f": {b.titles.get(rule, '')}")))
        if not c.findings_added and not c.findings_removed:
            console.print("findings: the same in both runs")
        console.print()
