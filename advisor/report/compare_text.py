"""Terminal view of `advisor compare`."""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from ..units import mib
from . import layout
from .escape import terminal


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
            rows.append(["peak memory", mib(b.peak_memory_bytes), mib(n.peak_memory_bytes),
                         _ratio(c.peak_memory_ratio)])
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
        if c.ops is not None:
            ops(c.ops, console)
        console.print()


TOP = 5     # ops named in text; the JSON and the HTML have them all


def _ms(v: float) -> str:
    return f"{v:,.2f}" if v else "-"


def _mib(v: int) -> str:
    return f"{v / 2**20:,.1f}" if v else "-"


def ops(diff, console: Console, top: int = TOP) -> None:
    """Which ops changed: the `top` that changed most in time per step, then at the memory peak."""
    if diff.missing:
        console.print(terminal(f"ops: not compared: {diff.missing}"))
        return
    timed, held = diff.by_time(), diff.by_memory()
    if not timed and not held:
        console.print(f"ops: the same in both runs ({diff.unchanged} matched)")
        return
    cols = [layout.Col("change"), layout.Col("op", wrap=True), layout.Col("base", number=True),
            layout.Col("new", number=True), layout.Col("ratio", number=True), layout.Col("source", wrap=True, drop=1)]
    if timed:
        layout.table(console, terminal(f"ops that changed most in time, ms per step ({min(top, len(timed))} of "
                                       f"{len(timed)} changed; matched by op_name and source line):"), cols,
                     [[c.time, terminal(c.label), _ms(c.base_ms), _ms(c.new_ms), _ratio(c.time_ratio),
                       terminal(c.source or "")] for c in timed[:top]])
    if held:
        layout.table(console, terminal(f"ops that changed most at the memory peak, MiB live there "
                                       f"({min(top, len(held))} of {len(held)} changed):"), cols,
                     [[c.memory, terminal(c.label), _mib(c.base_bytes), _mib(c.new_bytes),
                       _ratio(c.new_bytes / c.base_bytes if c.base_bytes and c.new_bytes else None),
                       terminal(c.source or "")] for c in held[:top]])
