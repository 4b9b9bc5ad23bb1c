"""The drawing pieces of the HTML reports (report/html.py, report/efficiency_html.py): figures drawn by
matplotlib as inline SVG, each beside a table of its numbers. Text from a trace reaches a figure
through `escape.mathtext`, a table through `escape.html`."""

from __future__ import annotations

import io
from typing import Any

from . import escape

# text stays text in the SVG (small, searchable); set only while drawing, never in the user's session
# svg.hashsalt: the ids in the SVG come from this salt, not from random: the same input gives the same file
STYLE = {"svg.fonttype": "none", "font.size": 9, "axes.spines.top": False, "axes.spines.right": False,
         "svg.hashsalt": "advisor"}


def svg(fig) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    text = buf.getvalue()
    return text[text.index("<svg"):]


def figure(width: float, height: float):
    from matplotlib.figure import Figure  # no pyplot: nothing can open a window

    fig = Figure(figsize=(width, height))
    return fig, fig.add_subplot()


def barh(labels: list[str], values: list[float], unit: str, title: str, color: str = "#2e86c1") -> str:
    fig, ax = figure(6.0, 0.35 * len(labels) + 0.9)
    y = list(range(len(labels)))[::-1]
    ax.barh(y, values, color=color)
    ax.set_yticks(y, [escape.mathtext(lab if len(lab) < 48 else lab[:45] + "…") for lab in labels])
    ax.set_xlabel(unit)
    ax.set_title(escape.mathtext(title), loc="left")
    for yi, v in zip(y, values):
        ax.text(v, yi, f" {v:,.2f}", va="center", fontsize=8)
    return svg(fig)


def table(headers: list[str], rows: list[list[Any]], caption: str) -> str:
    e = escape.html
    head = "".join(f"<th>{e(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(
        f'<td class="n">{e(c)}</td>' if isinstance(c, (int, float)) else f"<td>{e(c)}</td>" for c in r) + "</tr>"
        for r in rows)
    return f"<table><caption>{e(caption)}</caption><tr>{head}</tr>{body}</table>"


def chart(drawing: str, numbers: str, label: str) -> str:
    """A figure's SVG beside the table of its numbers."""
    return (f'<div class="chart" role="group" aria-label="{escape.html(label)}">'
            f'<figure>{drawing}</figure>{numbers}</div>')
