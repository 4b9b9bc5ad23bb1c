"""The efficiency section of the terminal report (`summary.efficiency`): the verdict line, MFU and
rates against the named peak, and the time, FLOPs and bytes per op category.

Everything from the trace (op names, device names, notes naming them) goes through
`escape.terminal`: rich `Text`, never markup.
"""

from __future__ import annotations

from typing import Optional

from rich.console import Console
from rich.table import Table
from rich.text import Text

from .escape import terminal
from ..units import si

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
    table = Table(show_header=False, box=None, pad_edge=False, title=Text("efficiency", style="bold"),
                  title_justify="left")
    table.add_column(style="dim")
    table.add_column()
    peak = eff.get("peak")
    per = "per step" if eff.get("steps") else "over the traced window, which has no steps"
    table.add_row("work", terminal(f"{count(eff['flops_per_step'], 'FLOP')} {per} "
                               f"({count(eff['matmul_flops_per_step'], 'FLOP')} in matmuls, "
                               f"{eff.get('matmul_dtype') or 'no matmuls'}), "
                               f"{count(eff['bytes_per_step'], 'B')} moved, over {eff['devices']} device(s)"))
    table.add_row("achieved", Text(f"{rate(eff.get('achieved_flops_per_s'))}, "
                                   f"{rate(eff.get('achieved_bytes_per_s'), 'B/s')} over the step"))
    if peak:
        table.add_row("peak", terminal(f"{peak['device']}: {rate(peak.get('flops_per_s'))} {peak['dtype']}, "
                                       f"{rate(peak.get('bytes_per_s'), 'B/s')} (source: {peak['source']})"))
        table.add_row("MFU / HFU", terminal(f"{pct(eff.get('mfu'))} / {pct(eff.get('hfu'))} of the peak {peak['dtype']} "
                                        "matmul rate (HFU counts remat's recomputation)"))
        if eff.get("ridge_flops_per_byte"):
            table.add_row("roofline", Text(f"ridge point {eff['ridge_flops_per_byte']:.3g} FLOP/B; ops whose "
                                           f"executions take under {eff['latency_threshold_us']:g} µs are "
                                           "latency-bound"))
    else:
        table.add_row("peak", Text("unknown (MFU needs one: --peak-flops and --peak-bandwidth, "
                                   "or advisor calibrate)"))
    if eff.get("unknown_flops_time_share"):
        table.add_row("no FLOP count", Text(f"{pct(eff['unknown_flops_time_share'])} of op time "
                                            "(custom calls the HLO does not describe)"))
    console.print(table)
    cats = eff.get("categories") or []
    if cats:
        over = f"over {eff['steps']} steps" if eff.get("steps") else "over the traced window"
        t = Table(title=Text(f"op time by category on one device, {over}"), title_justify="left")
        for col in ("category", "time", "FLOPs", "bytes", "FLOP/s", "bytes/s", "of peak FLOP/s", "of peak B/s",
                    "bound"):
            t.add_column(col, justify="left" if col in ("category", "bound") else "right")
        for c in cats:
            t.add_row(terminal(c["category"]), f"{c['time_s'] * 1e3:.3f} ms", count(c["flops"], "FLOP"),
                      count(c["bytes"], "B"), rate(c["flops_per_s"]), rate(c["bytes_per_s"], "B/s"),
                      pct(c["flops_share_of_peak"]), pct(c["bytes_share_of_peak"]),
                      terminal(c["bound"] or "-", _BOUND_STYLE.get(c["bound"] or "", "")))
        console.print(t)
    ops = [o for o in eff.get("ops") or [] if o.get("bound") != "communication"][:TOP_OPS]
    if ops and peak:
        t = Table(title=Text(f"the {len(ops)} longest ops against their roofline (share of the rate the peaks "
                             "allow at their intensity)"), title_justify="left")
        for col in ("op", "category", "time", "FLOP/B", "FLOP/s", "bytes/s", "of roof", "bound"):
            t.add_column(col, justify="left" if col in ("op", "category", "bound") else "right")
        for o in ops:
            t.add_row(terminal(o["name"]), terminal(o["category"]), f"{o['time_s'] * 1e3:.3f} ms",
                      "-" if o.get("intensity") is None else f"{o['intensity']:.3g}", rate(o.get("flops_per_s")),
                      rate(o.get("bytes_per_s"), "B/s"), pct(o.get("roof_share")),
                      terminal(o.get("bound") or "-", _BOUND_STYLE.get(o.get("bound") or "", "")))
        console.print(t)
    for note in eff.get("notes", []):
        console.print(terminal(f"note: {note}", "dim"))
