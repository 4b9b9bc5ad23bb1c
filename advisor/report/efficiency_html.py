"""The efficiency charts of the HTML report (`summary.efficiency`): a roofline (each op a point at its
arithmetic intensity and achieved FLOP/s, sized by its time, under both roofs of the named peak)
and the category table. Names from the trace reach the chart through `escape.mathtext`."""

from __future__ import annotations

from typing import Optional

from . import charts, escape
from .efficiency_text import pct, rate

LABELLED = 5        # the longest ops get their name beside their point

_BOUND_COLOR = {"compute": "#27ae60", "memory": "#e67e22", "latency": "#8e44ad", None: "#7f8c8d"}


def figures(eff: Optional[dict]) -> list[str]:
    if not eff:
        return []
    out = []
    roofline = _roofline(eff)
    if roofline:
        out.append(roofline)
    cats = eff.get("categories") or []
    if cats:
        steps = eff.get("steps")
        title = (f"op time by category, per step on one device (mean of {steps} steps)" if steps
                 else "op time by category on one device, over the traced window (no steps)")
        each = "per step" if steps else "in the window"
        rows = [[c["category"], round(c["time_per_step_s"] * 1e3, 3),
                 rate(c["flops_per_step"], "FLOP") if c["flops_per_step"] is not None else "unknown",
                 rate(c["bytes_per_step"], "B"), rate(c["flops_per_s"]), rate(c["bytes_per_s"], "B/s"),
                 pct(c["flops_share_of_peak"]), pct(c["bytes_share_of_peak"]), c["bound"] or "—"] for c in cats]
        peak = eff.get("peak")
        source = f"; peak: {peak['device']} ({peak['source']})" if peak else "; no peak known"
        table = charts.table(["category", f"ms {each}", f"FLOPs {each}", f"bytes {each}", "FLOP/s", "bytes/s",
                        "of peak FLOP/s", "of peak B/s", "bound"], rows, f"{title}{source}")
        out.append(f'<div class="chart" role="group" aria-label="efficiency by category">{table}</div>')
    return out


def _roofline(eff: dict) -> Optional[str]:
    peak = eff.get("peak") or {}
    ops = [o for o in eff.get("ops") or [] if o.get("intensity") and o.get("flops_per_s") and o["time_s"] > 0]
    if not ops:
        return None
    fig, ax = charts.figure(6.4, 4.0)
    total = sum(o["time_s"] for o in ops)
    for bound in ("compute", "memory", "latency", None):
        pts = [o for o in ops if o.get("bound") == bound]
        if pts:
            ax.scatter([o["intensity"] for o in pts], [o["flops_per_s"] for o in pts],
                       s=[20 + 600 * o["time_s"] / total for o in pts], alpha=0.6, color=_BOUND_COLOR[bound],
                       label=bound or "bound unknown", edgecolors="none")
    for o in sorted(ops, key=lambda o: -o["time_s"])[:LABELLED]:
        ax.annotate(escape.mathtext(o["name"][:32]), (o["intensity"], o["flops_per_s"]), fontsize=7,
                    xytext=(4, 2), textcoords="offset points")
    xs = [o["intensity"] for o in ops]
    lo, hi = min(xs) / 4, max(xs) * 4
    f_peak, b_peak = peak.get("flops_per_s"), peak.get("bytes_per_s")
    if f_peak and b_peak:
        lo = min(lo, f_peak / b_peak / 8)
        hi = max(hi, f_peak / b_peak * 8)
        grid = [lo * (hi / lo) ** (i / 200) for i in range(201)]
        ax.plot(grid, [min(f_peak, b_peak * x) for x in grid], color="#2c3e50", linewidth=1.2,
                label=f"roofs: {rate(f_peak)}, {rate(b_peak, 'B/s')}")
        ax.axvline(f_peak / b_peak, color="#2c3e50", linewidth=0.6, linestyle=":")
        for roof in [r for r in peak.get("bandwidth_roofs") or [] if r.get("fits_bytes")]:   # calibrated caches
            ax.plot(grid, [min(f_peak, roof["bytes_per_s"] * x) for x in grid], color="#2c3e50", linewidth=0.8,
                    linestyle="--", label=escape.mathtext(f"{roof['level']}: {rate(roof['bytes_per_s'], 'B/s')}"))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_xlabel("arithmetic intensity (FLOP per byte)")
    ax.set_ylabel("achieved FLOP/s")
    title = "roofline: ops by intensity and rate, sized by time"
    if peak:
        title += f" (peak: {peak['device']})"
    ax.set_title(escape.mathtext(title), loc="left")
    ax.legend(fontsize=7, loc="lower right")
    rows = [[o["name"], o.get("module", ""), round(o["time_per_step_s"] * 1e3, 3), float(f"{o['intensity']:.3g}"),
             rate(o["flops_per_s"]), o.get("bound") or "—"] for o in sorted(ops, key=lambda o: -o["time_s"])[:12]]
    source = f"peak: {peak['source']}" if peak else "no peak known: pass --peak-flops and --peak-bandwidth"
    table = charts.table(["op", "program", "ms per step" if eff.get("steps") else "ms in the window", "FLOP/B",
                          "FLOP/s", "bound"], rows,
                         f"the longest ops on the roofline ({source}; latency-bound: executions under "
                         f"{eff.get('latency_threshold_us', 5):g} µs)")
    return charts.chart(charts.svg(fig), table, "roofline")
