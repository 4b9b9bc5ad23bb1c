"""Terminal view of `advisor tune`: the table of combinations, then the best one that fits."""

from __future__ import annotations

from rich.console import Console

from ..units import mib
from . import layout
from .escape import terminal


def render(doc: dict, console: Console) -> None:
    cols = [layout.Col("config", wrap=True), layout.Col("step time", number=True),
            layout.Col("vs reference", number=True), layout.Col("peak memory", number=True),
            layout.Col("fits", wrap=True)]
    cells = []
    for r in doc["rows"]:
        if r.get("step_time_ms") is not None:
            step = f"{r['step_time_ms']:,.1f} ms" + (f" ±{r['noise']:.0%}" if not r.get("reference") else "")
            ratio = "reference" if r.get("reference") else f"x{r['ratio']:.2f} ({r['verdict']})"
        else:
            step = "not run" if not r["fits"] else "not timed"
            ratio = r.get("error") or r.get("not_timed") or ("reference" if r.get("reference") else "")
        peak = mib(r["peak_memory_bytes"]) if r["peak_memory_bytes"] else "n/a"
        cells.append([terminal(r["config"]), terminal(step), terminal(ratio), peak,
                      "fits" if r["fits"] else terminal("does not fit" if r["peak_memory_bytes"] else "-", "red")])
    title = (f"tune {doc['workload']} ({doc['preset']}): {len(doc['rows'])} combinations, compiled against "
             f"{mib(doc['capacity_bytes'])} ({doc['capacity_source']}); step time: interleaved paired rounds "
             "against the reference, the workload as given where it fits (noise: the ratio's 90% band)")
    layout.table(console, terminal(title), cols, cells)
    if doc["not_timed"]:
        console.print(terminal(f"not timed (the --budget of {doc['budget_s']:.0f} s was spent): "
                               + ", ".join(doc["not_timed"])))
    best = doc["best"]
    if best is None:
        console.print(terminal("best: none timed (no combination fits, or none could run)", "yellow"))
        return
    flags = " ".join(f"--set {i}" for i in best["set"]) or "(the workload as given)"
    said = ("the only combination that fits (nothing to time it against)" if best.get("step_time_ms") is None
            else "the reference measured fastest" if best.get("reference")
            else f"x{best['ratio']:.2f} ±{best['noise']:.0%} of the reference step ({best['verdict']}), "
                 f"peak {mib(best['peak_memory_bytes'])}")
    console.print(terminal(f"best that fits: {best['config']}: {said}", "bold"))
    console.print(terminal(f"    {flags}"))

