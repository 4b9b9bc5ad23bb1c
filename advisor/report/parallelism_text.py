"""The parallelism section of the terminal report: the mesh, collectives by axis and role, the
pipeline's bubble, the state per axis and memory by kind (from `runs[].summary.parallelism`).

Everything from the trace (axis names, which a user may pass or a run may record) goes through
`escape.terminal`: rich `Text`, never markup strings, control characters shown as escapes.
"""
from __future__ import annotations

from rich.console import Console
from rich.text import Text

from ..units import mib, size
from . import layout
from .escape import terminal, visible

MAX_ROWS = 10


def _t(value) -> Text:
    return terminal(value)


def render(doc: dict, console: Console) -> None:
    view = doc.get("summary", {}).get("parallelism")
    if not view:
        return
    axes = view["mesh"]["axes"]
    head = Text("mesh: ", style="bold")
    head.append(visible(" x ".join(f"{a['name']}={a['size']}" for a in axes) or "one axis"))
    head.append(f"  ({_SOURCE.get(view['mesh'].get('source'), '')})", style="dim")
    console.print(head)
    rows = view.get("collectives") or []
    if rows:
        shown = rows[:MAX_ROWS]
        more = f", the {len(shown)} longest of {len(rows)}" if len(rows) > len(shown) else ""
        cols = [layout.Col("axis"), layout.Col("kind"), layout.Col("role", wrap=True)]
        cols += [layout.Col(c, number=True) for c in ("per step", "bytes per step", "time per step",
                                                       "exposed per step")]
        layout.table(console, f"collectives by mesh axis and role, per step on one device (mean over devices{more})",
                     cols, [[_t(f"{r['axis']} ({r['axis_size']})"), _t(r["kind"]), _t(r["role"]),
                             _t(f"{r['count_per_step']:g}"), _t(size(r["bytes_per_step"])),
                             _t(f"{r['time_s'] * 1e3:,.2f} ms"), _t(f"{r['exposed_s'] * 1e3:,.2f} ms")] for r in shown])
    pipe = view.get("pipeline")
    if pipe:
        line = Text("pipeline: ", style="bold")
        work = pipe["iterations"] - pipe["padding_iterations"]
        if pipe["microbatches"] is not None:
            parts = f"{pipe['microbatches']} microbatches" + (f" x {pipe['loops']} loops" if (pipe["loops"] or 1) > 1
                                                              else "")
        else:
            parts = f"{work} microbatch-iterations"
        line.append(visible(f"{pipe['stages']} stages over {pipe['axis']}, {parts}: {pipe['iterations']} "
                            f"iterations per stage, {pipe['padding_iterations']} of them padding; bubble "
                            f"{pipe['bubble_fraction'] * 100:.1f}% of the pipeline's compute, "
                            "(S - 1) / (L*M + S - 1)"))
        console.print(line)
    state = view.get("state")
    if state:
        line = Text("state per device: ", style="bold")
        line.append(mib(state["bytes_per_device"]))
        if state["split_over"]:
            line.append(visible(f", split over {', '.join(state['split_over'])}"))
        if state["replicated_over"]:
            line.append(visible(f", copied over {', '.join(state['replicated_over'])} (FSDP there would free "
                                f"{mib(state['fsdp_saving_bytes'])} per device)"))
        elif state["split_over"]:
            line.append(", copied over no axis")
        console.print(line)
    memory = view.get("memory_by_kind") or {}
    if memory:
        line = Text("memory at the peak by kind (one device): ", style="bold")
        line.append(", ".join(f"{_KINDS.get(k, k)} {size(v)}"
                              for k, v in sorted(memory.items(), key=lambda kv: -kv[1])))
        console.print(line)
    for note in view.get("notes", []):
        console.print(terminal(f"note: {note}", style="dim"))


_KINDS = {"state": "state", "inputs": "inputs", "gathered_weights": "gathered or sliced weights",
          "gradients": "gradients", "activations": "activations", "outputs": "outputs", "temporaries": "temporaries"}
_SOURCE = {"recorded": "axis names recorded with the run", "given": "axis names from --mesh",
           "inferred": "axes inferred from the HLO's device groups, named by what runs over them"}
