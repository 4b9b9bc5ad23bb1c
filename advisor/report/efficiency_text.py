"""The efficiency section of the terminal report (`summary.efficiency`): the verdict line, MFU and
rates against the named peak, and the time, FLOPs and bytes per op category.

Everything from the trace (op names, device names, notes naming them) goes through
`escape.terminal`: rich `Text`, never markup.
"""

from __future__ import annotations

from typing import Optional

from rich.console import Console
from rich.text import Text

from ..units import si, sig
from . import layout
from .escape import terminal

TOP_OPS = 5        # ops listed against their roofline in the text report
_BOUND_STYLE = {"compute": "green", "memory": "yellow", "latency": "magenta", "host": "red", "communication": "cyan"}


def rate(x: Optional[float], unit: str = "FLOP/s") -> str:
    return "-" if x is None else si(x, unit)


def count(x: Optional[float], unit: str) -> str:
    return rate(x, unit)


def pct(x: Optional[float]) -> str:
    return "-" if x is None else f"{x:.1%}"


def verdict_line(doc: dict) -> Optional[Text]:
    """The step's verdict, for the top of the run's report."""
    eff = doc.get("summary", {}).get("efficiency")
    if not eff or not eff.get("verdict"):
        return None
    line = Text("verdict: ", style="bold")
    line.append(terminal(eff["verdict"], _BOUND_STYLE.get(eff.get("bound") or "", "")))
    return line


def render(doc: dict, console: Console) -> None:
    eff = doc.get("summary", {}).get("efficiency")
    if not eff:
        return
    rows = []
    peak = eff.get("peak")
    per = "per step" if eff.get("steps") else "over the traced window, which has no steps"
    rows.append(("work", terminal(f"{count(eff['flops_per_step'], 'FLOP')} {per} "
                                  f"({count(eff['matmul_flops_per_step'], 'FLOP')} in matmuls, "
                                  f"{eff.get('matmul_dtype') or 'no matmuls'}), "
                                  f"{count(eff['bytes_per_step'], 'B')} moved, over {eff['devices']} device(s)")))
    rows.append(("achieved", Text(f"{rate(eff.get('achieved_flops_per_s'))}, "
                                  f"{rate(eff.get('achieved_bytes_per_s'), 'B/s')} over the "
                                  f"{'step' if eff.get('steps') else 'traced window'}")))
    if peak:
        rows.append(("peak", terminal(f"{peak['device']}: {rate(peak.get('flops_per_s'))} {peak['dtype']}, "
                                      f"{_bandwidth(peak)} (source: {peak['source']})")))
        rows.append(("MFU / HFU", terminal(f"{pct(eff.get('mfu'))} / {pct(eff.get('hfu'))} of the peak {peak['dtype']} "
                                           "matmul rate (HFU counts remat's recomputation)")))
        if eff.get("ridge_flops_per_byte"):
            rows.append(("roofline", Text(f"ridge point {sig(eff['ridge_flops_per_byte'])} FLOP/B{_ridges(peak)}; "
                                          f"ops whose executions take under {eff['latency_threshold_us']:g} µs are "
                                          "latency-bound")))
    else:
        rows.append(("peak", Text("unknown (MFU needs one: --peak-flops and --peak-bandwidth, "
                                  "or advisor calibrate)")))
    if eff.get("unknown_flops_time_share"):
        rows.append(("no FLOP count", Text(f"{pct(eff['unknown_flops_time_share'])} of op time "
                                           "(custom calls the HLO does not describe)")))
    layout.pairs(console, rows, Text("efficiency", style="bold"))
    _categories(eff, console)
    _ops(eff, console)
    for note in eff.get("notes", []):
        console.print(terminal(f"note: {note}", "dim"))


def _bandwidth(peak: dict) -> str:
    """The peak's bandwidth roofs: one (HBM, or the figure given), or the cache and DRAM roofs measured
    by advisor calibrate, each with the working sets it applies to."""
    roofs = peak.get("bandwidth_roofs") or []
    if not roofs:
        return rate(peak.get("bytes_per_s"), "B/s")
    return ", ".join(f"{rate(r['bytes_per_s'], 'B/s')} {r['level']}"
                     + (f" (ops whose data fits in {_size(r['fits_bytes'])})" if r.get("fits_bytes") else "")
                     for r in roofs)


def _ridges(peak: dict) -> str:
    """The ridge point of each cache roof, beside DRAM's (an op is judged at the roof of its data's level)."""
    roofs = [r for r in peak.get("bandwidth_roofs") or [] if r.get("fits_bytes")]
    if not roofs or not peak.get("flops_per_s"):
        return ""
    return " from DRAM, " + ", ".join(f"{sig(peak['flops_per_s'] / r['bytes_per_s'])} from {r['level']}" for r in roofs)


def _size(n: float) -> str:
    return f"{n / 2**20:g} MiB" if n >= 2**20 else f"{n / 2**10:g} KiB"


def _bound(value: Optional[str]) -> Text:
    return terminal(value or "-", _BOUND_STYLE.get(value or "", ""))


def _categories(eff: dict, console: Console) -> None:
    """Time, work and rates per category, per step (the trace's window when it has no steps)."""
    cats = eff.get("categories") or []
    if not cats:
        return
    steps = eff.get("steps")
    each = "per step" if steps else "in the window"
    title = (f"op time by category, per step on one device (mean of {steps} steps)" if steps
             else "op time by category on one device, over the traced window (no steps)")
    shares = bool(eff.get("peak"))
    cols = [layout.Col("category", wrap=True), layout.Col(f"time {each}", number=True),
            layout.Col(f"FLOPs {each}", number=True, drop=2), layout.Col(f"bytes {each}", number=True, drop=2),
            layout.Col("FLOP/s", number=True, drop=1), layout.Col("bytes/s", number=True, drop=1)]
    if shares:
        cols += [layout.Col("of peak FLOP/s", number=True), layout.Col("of peak B/s", number=True)]
    cols.append(layout.Col("bound"))
    rows = []
    for c in cats:
        row = [terminal(c["category"]), f"{c['time_per_step_s'] * 1e3:,.2f} ms", count(c["flops_per_step"], "FLOP"),
               count(c["bytes_per_step"], "B"), rate(c["flops_per_s"]), rate(c["bytes_per_s"], "B/s")]
        if shares:
            row += [pct(c["flops_share_of_peak"]), pct(c["bytes_share_of_peak"])]
        rows.append(row + [_bound(c["bound"])])
    layout.table(console, title, cols, rows)


def _ops(eff: dict, console: Console) -> None:
    ops = [o for o in eff.get("ops") or [] if o.get("bound") != "communication"][:TOP_OPS]
    if not ops or not eff.get("peak"):
        return
    each = "per step" if eff.get("steps") else "in the window"
    title = (f"the {len(ops)} longest ops against their roofline (share of the rate the peaks allow at their "
             "intensity)")
    cols = [layout.Col("op", wrap=True), layout.Col("category", wrap=True, drop=2),
            layout.Col(f"time {each}", number=True), layout.Col("FLOP/B", number=True),
            layout.Col("FLOP/s", number=True, drop=1), layout.Col("bytes/s", number=True, drop=1),
            layout.Col("of roof", number=True), layout.Col("bound")]
    rows = [[terminal(o["name"]), terminal(o["category"]), f"{o['time_per_step_s'] * 1e3:,.3f} ms",
             "-" if o.get("intensity") is None else sig(o['intensity']), rate(o.get("flops_per_s")),
             rate(o.get("bytes_per_s"), "B/s"), pct(o.get("roof_share")), _bound(o.get("bound"))] for o in ops]
    layout.table(console, title, cols, rows)
