"""The HTML report: one self-contained file (inline CSS, inline SVG charts drawn by matplotlib),
no script, no network. Numbers come from the runs' result documents (summary, findings, views, compare's metrics);
this module only formats and draws them. Every chart has a table with its numbers beside it.
"""

from __future__ import annotations

import json
from typing import Any, Optional

from .. import op_diff
from ..run_label import from_summary, label
from ..units import mib, sig
from . import charts, coverage, efficiency_html, escape, json_report
from .charts import STYLE

CSS = """
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1d2330;max-width:1100px;
margin:0 auto;padding:24px}
h1{font-size:1.5em;margin:0 0 4px}h2{font-size:1.2em;border-bottom:1px solid #d5d9e0;padding-bottom:4px;
margin-top:28px}h3{font-size:1.05em;margin:0 0 6px}
.meta{color:#5a6270;font-size:.9em}
.cards{display:flex;flex-wrap:wrap;gap:10px;margin:14px 0}
.card{border:1px solid #d5d9e0;border-radius:6px;padding:8px 12px;min-width:150px}
.card b{display:block;font-size:1.25em}
.finding{border:1px solid #d5d9e0;border-left:6px solid #888;border-radius:6px;padding:10px 14px;margin:12px 0;
break-inside:avoid}
.finding.error{border-left-color:#c0392b}.finding.warning{border-left-color:#d68910}.finding.info{border-left-color:#2e86c1}
.sev{font-size:.8em;text-transform:uppercase;font-weight:600;padding:1px 6px;border-radius:3px;background:#eef0f3}
code{font:13px ui-monospace,Menlo,Consolas,monospace;background:#f3f4f6;padding:1px 4px;border-radius:3px}
table{border-collapse:collapse;font-size:.9em;margin:6px 0}td,th{border:1px solid #d5d9e0;padding:3px 8px;
text-align:left;vertical-align:top}td.n{text-align:right;font-variant-numeric:tabular-nums}
.ops td{overflow-wrap:anywhere}
.chart{display:flex;flex-wrap:wrap;gap:16px;align-items:flex-start;margin:10px 0;break-inside:avoid}
.chart svg{max-width:100%;height:auto}figure{margin:0}
details summary{cursor:pointer;color:#2e5c99}
dl{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px;margin:6px 0}dt{font-weight:600}dd{margin:0}
@media print{body{max-width:none;padding:0;font-size:11pt}details{display:block}details>*{display:block}
.finding,.chart{break-inside:avoid}a{color:inherit}}
"""


def _e(x: Any) -> str:
    return escape.html(x)


def _prose(text: str) -> str:
    """A recommendation's text: its `code` spans as <code>, every part escaped (no raw backticks)."""
    parts = str(text).split("`")
    if len(parts) % 2 == 0:       # an odd number of backticks: not code spans, shown as written
        return _e(text)
    return "".join(f"<code>{_e(p)}</code>" if i % 2 else _e(p) for i, p in enumerate(parts))


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return sig(v, 4)        # 12,345,678 where :.4g wrote 1.235e+07
    if isinstance(v, (list, dict)):
        text = json.dumps(v, default=str)
        return text if len(text) < 300 else text[:297] + "…"
    return str(v)


def _finding(f: dict, extra: str = "") -> str:
    rec = f["recommendation"]
    exp = rec["expected"]
    evidence = "".join(f"<dt>{_e(k)}</dt><dd>{_e(_fmt(v))}</dd>" for k, v in f["evidence"].items())
    from advisor.workloads.config import as_items
    config = "".join(f"<code>--set {_e(o)}</code> " for o in as_items(rec.get("config") or {}))
    out = [f'<section class="finding {_e(f["severity"])}" id="rule-{_e(f["rule"])}">',
           f'<h3><span class="sev">{_e(f["severity"])}</span> <code>{_e(f["rule"])}</code> {_e(f["title"])}</h3>',
           "<dl>",
           f"<dt>recommendation</dt><dd>{_prose(rec['text'])} {config}</dd>",
           f"<dt>expected gain</dt><dd>{_prose(exp['text'])}</dd>",     # the text has the figure (as the CLI's)
           f"<dt>cost</dt><dd>{_prose(rec['cost'])}</dd>",
           f"<dt>checked</dt><dd>{_e(rec.get('checked', 'estimated'))}: {_prose(rec.get('check', ''))}</dd>",
           "<dt>source</dt><dd>"
           f"{'<code>' + _e(f['source']) + '</code>' if f.get('source') else 'not in the trace'}</dd>",
           "</dl>",
           f"<details><summary>evidence</summary><dl>{evidence}</dl></details>", extra]
    if f.get("verified"):
        out.append(_verified(f["rule"], f["verified"]))
    out.append("</section>")
    return "".join(out)


def _verified(rule: str, v: dict) -> str:
    if "step_time_ms" not in v:
        return f"<p>verified: {_e(_fmt(v))}</p>"
    rows = [["step time (ms)", *v["step_time_ms"]],
            ["peak memory (MiB)", *[round(b / 2**20, 1) if b else None for b in v["peak_memory_bytes"]]]]
    fig, axes = charts.figure(5.0, 1.8)
    fig.clear()
    for i, (name, before, after) in enumerate(rows):
        ax = fig.add_subplot(1, 2, i + 1)
        # lower is better for both: the after bar green only where it is lower, red where higher
        worse = before is not None and after is not None and after > before
        better = before is not None and after is not None and after < before
        ax.bar(["before", "after"], [before or 0, after or 0],
               color=["#9aa5b1", "#27ae60" if better else "#c0392b" if worse else "#9aa5b1"])
        ax.set_title(escape.mathtext(name), fontsize=9)
    verdict = "improved" if v.get("improved") else "not improved"
    return charts.chart(charts.svg(fig),
                        charts.table(["measure", "before", "after"], rows, f"verify of {rule}: {verdict}"),
                        f"verify {rule}: before and after")


def figures(document: dict) -> list[str]:
    """The charts of one run's result document (each with its table): the drawing part of a run's
    section, which needs matplotlib."""
    import matplotlib

    with matplotlib.rc_context(STYLE):
        return _figures(document["run"], document.get("views"))


def _figures(doc: dict, views: Optional[dict]) -> list[str]:
    s = doc["summary"]
    out = _plots(views, s) if views else []
    out += _device_chart(s)
    out += _parallelism_charts(s.get("parallelism"))
    out += efficiency_html.figures(s.get("efficiency"))
    for d in s.get("devices", []):
        if "busy_in_steps_ms" in d:
            cats = d["time_by_category_ms"]
            svg = charts.barh(list(cats), list(cats.values()), "ms in the traced window",
                              f"{d['name']}: time by category, in the traced window")
            out.append(charts.chart(svg, charts.table(["category", "ms"], [[k, v] for k, v in cats.items()]
                                          + [["busy in the steps", d["busy_in_steps_ms"]],
                                             ["idle in the steps", d["idle_in_steps_ms"]]],
                                          f"{d['name']}: op time by category and idle time, in ms over the "
                                          "traced window"), d["name"]))
    return out


def run_section(doc: dict, charts: list[str], finding_extra=None) -> str:
    """One run's section: summary cards, findings most costly first, the charts from `figures`, notes.
    finding_extra(finding_doc) -> HTML added inside each finding (the TensorBoard tab's links)."""
    s = doc["summary"]
    cards = [("step time", f"{s['step_time_ms']:,.2f} ms" if s.get("step_time_ms") is not None else "unknown"),
             ("steps", s.get("steps")),
             ("step spread", f"{s['step_time_spread_ms']:,.2f} ms" if s.get("step_time_spread_ms") is not None
              else "—"),
             ("op time per step", f"{s['op_time_per_step_ms']:,.2f} ms" if s.get("op_time_per_step_ms") is not None
              else "—"),
             ("peak memory", mib(s["peak_memory_bytes"]) if s.get("peak_memory_bytes") else "unknown"),
             ("device capacity", mib(s["device_capacity_bytes"]) if s.get("device_capacity_bytes") else "unknown"),
             ("findings", len(doc["findings"]))]
    ran = label(from_summary(s.get("run")))       # the workload and the settings it changed
    out = [f"<h2>Run <code>{_e(doc['path'])}</code></h2>",
           f'<p class="meta">{_e(ran) + " · " if ran else ""}{_e(doc["backend"])} · {_e(doc["device"])} · step program '
           f'<code>{_e(s.get("step_module"))}</code> · peak from {_e(s.get("peak_memory_source"))}</p>',
           '<div class="cards">' + "".join(f"<div class=card>{_e(k)}<b>{_e(v)}</b></div>" for k, v in cards)
           + "</div>"]
    verdict = (s.get("efficiency") or {}).get("verdict")     # the step's verdict, where it was measured
    if verdict:
        out.append(f'<p class="verdict"><b>verdict</b> {_prose(verdict)}</p>')
    out.append("<h2>Findings</h2>")
    out += ([_finding(f, finding_extra(f) if finding_extra else "") for f in doc["findings"]]
            or ([] if coverage.summary(doc)
                else [f"<p>{_e(coverage.NO_RULE_RAN)}</p>" if not (doc.get("rules") or {}).get("ran")
                      and not (doc.get("rules") or {}).get("could_not_run")
                      else "<p>No findings: no rule fired on this run.</p>"]))
    said = coverage.summary(doc)
    if said:
        head, groups, ran = said
        out.append(f'<p class="coverage"><b>{_e(head)}:</b></p><ul>'
                   + "".join(f"<li>{_e(why)}: {_e(', '.join(ids))}</li>" for why, ids in groups)
                   + (f"<li>{_e(ran)}</li>" if ran else "") + "</ul>")
    out.append("<h2>Where the step's time and memory go</h2>")
    out += charts
    if doc.get("notes"):
        out.append("<h2>Notes</h2><ul>" + "".join(f"<li>{_e(n)}</li>" for n in doc["notes"]) + "</ul>")
    if doc.get("warnings"):
        out.append("<h2>Warnings</h2><ul>" + "".join(f"<li>{_e(n)}</li>" for n in doc["warnings"]) + "</ul>")
    return "".join(out)


def _run(doc: dict, views: Optional[dict]) -> str:
    return run_section(doc, _figures(doc, views))


def _device_chart(summary: dict) -> list[str]:
    """Per device: compute, collective transfer, collective wait, idle (stacked), when there are several."""
    devices = [d for d in summary.get("devices", []) if "compute_ms" in d]
    if len(devices) < 2:
        return []
    parts = [("compute", "compute_ms", "#2e86c1"), ("collective transfer", "collective_transfer_ms", "#e67e22"),
             ("collective wait", "collective_wait_ms", "#c0392b"), ("idle", "idle_ms", "#bdc3c7")]
    labels = [f"{d['name']} ({d['host']})" + (" slowest" if d.get("slowest") else "") for d in devices]
    fig, ax = charts.figure(6.0, 0.35 * len(devices) + 1.2)
    y = list(range(len(devices)))[::-1]
    left = [0.0] * len(devices)
    for name, key, color in parts:
        values = [d[key] for d in devices]
        ax.barh(y, values, left=left, color=color, label=name)
        left = [a + b for a, b in zip(left, values)]
    ax.set_yticks(y, [escape.mathtext(lab) for lab in labels])
    per = "ms per step" if all(d.get("steps") for d in devices) else "ms over the traced window"
    ax.set_xlabel(per)
    ax.legend(fontsize=7, loc="lower right")
    ax.set_title("each device's step", loc="left")
    rows = [[d["name"], d["host"], d["compute_ms"], d["collective_transfer_ms"], d["collective_wait_ms"],
             d["idle_ms"], mib(d["peak_memory_bytes"]) if d.get("peak_memory_bytes") is not None else "unknown",
             "slowest" if d.get("slowest") else ""] for d in devices]
    table = charts.table(["device", "host", "compute ms", "transfer ms", "wait ms", "idle ms", "peak", ""], rows,
                   f"per device, {per}: compute, collective transfer, waiting for peers, idle")
    return [charts.chart(charts.svg(fig), table, "per-device step")]


def _parallelism_charts(view: Optional[dict]) -> list[str]:
    """The pipeline's schedule (stages x iterations, the padding shaded) and the collectives by mesh
    axis and role, from summary.parallelism."""
    if not view:
        return []
    out = []
    pipe = view.get("pipeline")
    if pipe and pipe["stages"] and pipe["iterations"]:
        out.append(_schedule_chart(pipe))
    rows = view.get("collectives") or []
    if rows:
        labels = [f"{r['axis']} {r['kind']} ({r['role']})" for r in rows]
        svg = charts.barh(labels, [r["time_s"] * 1e3 for r in rows], "ms per step on one device",
                    "collectives by mesh axis and role")
        table = charts.table(["axis", "size", "kind", "role", "per step", "bytes per step", "ms", "exposed ms"],
                       [[r["axis"], r["axis_size"], r["kind"], r["role"], r["count_per_step"], r["bytes_per_step"],
                         round(r["time_s"] * 1e3, 3), round(r["exposed_s"] * 1e3, 3)] for r in rows],
                       "collectives by mesh axis and role, per step on one device (mean over devices)")
        out.append(charts.chart(svg, table, "collectives by axis"))
    return out


def _schedule_chart(pipe: dict) -> str:
    """Each stage's iterations of the forward schedule: stage s works on microbatch-iteration i - s
    when 0 <= i - s < L*M, and on padding otherwise (the bubble, shaded)."""
    stages, iterations = pipe["stages"], pipe["iterations"]
    work = iterations - pipe["padding_iterations"]
    micro = pipe.get("microbatches") or work
    fig, ax = charts.figure(min(9.0, 1.2 + 0.35 * iterations), 0.45 * stages + 1.0)
    for s in range(stages):
        for i in range(iterations):
            k = i - s
            busy = 0 <= k < work
            ax.broken_barh([(i, 0.95)], (stages - 1 - s, 0.9), color="#2e86c1" if busy else "#d5d8dc",
                           hatch=None if busy else "//", edgecolor="white")
            if busy and iterations <= 40:
                ax.text(i + 0.47, stages - 1 - s + 0.45, str(k % micro), ha="center", va="center", fontsize=7,
                        color="white")
    ax.set_yticks([stages - 1 - s + 0.45 for s in range(stages)], [f"stage {s}" for s in range(stages)])
    ax.set_xlim(0, iterations)
    ax.set_xlabel("schedule iteration (forward; the backward loop runs it in reverse)")
    ax.set_title(escape.mathtext(f"pipeline over {pipe.get('axis', 'pipe')}: bubble "
                                 f"{pipe['bubble_fraction'] * 100:.1f}% (shaded: padding)"), loc="left")
    table = charts.table(["stages", "microbatches", "loops", "iterations", "padding iterations", "bubble"],
                   [[stages, pipe.get("microbatches") if pipe.get("microbatches") is not None else "unknown",
                     pipe.get("loops") if pipe.get("loops") is not None else "unknown", iterations,
                     pipe["padding_iterations"], f"{pipe['bubble_fraction'] * 100:.1f}%"]],
                   "the pipeline schedule: (S - 1) / (L*M + S - 1) of each stage's iterations are padding")
    return charts.chart(charts.svg(fig), table, "pipeline schedule")


def _plots(views: dict, summary: dict) -> list[str]:
    """Each step's time, op time by category, and what is live at the memory peak (the views the JSON
    leaves out)."""
    step_times, categories = views["step_time"]["step_times_ms"], views["step_time"]["category_ms_per_step"]
    out = []
    if step_times:
        fig, ax = charts.figure(6.0, 2.2)
        ax.plot(range(len(step_times)), step_times, marker="o", color="#2e86c1")
        ax.set_xticks(range(len(step_times)))
        ax.set_xlabel("step")
        ax.set_ylabel("ms")
        ax.set_ylim(bottom=0)
        ax.set_title("step time per step", loc="left")
        out.append(charts.chart(charts.svg(fig),
                                charts.table(["step", "ms"], [[i, t] for i, t in enumerate(step_times)],
                                             f"step time per step ({summary.get('steps_from')})"),
                                "step time"))
    cats = dict(list(categories.items())[:12])
    if cats:
        out.append(charts.chart(charts.barh(list(cats), list(cats.values()), "ms per step", "op time by category"),
                          charts.table(["category", "ms per step"], [[k, v] for k, v in cats.items()],
                                 "op time by category, per step"), "op time by category"))
    mem = views.get("memory")
    if mem:
        groups = mem["by_kind"]
        out.append(charts.chart(charts.barh(list(groups), [v / 2**20 for v in groups.values()], "MiB",
                                            f"memory at peak by kind ({mem['module']})", "#8e44ad"),
                                charts.table(["kind", "MiB"], [[k, round(v / 2**20, 2)] for k, v in groups.items()],
                                             f"memory at peak by kind: {mib(mem['peak_bytes'])} in all"),
                                "memory at peak by kind"))
        largest = mem["largest"]
        numbers = charts.table(["buffer", "shape", "kind", "MiB"],
                               [[b["instruction"], b["shape"], b["group"], round(b["bytes"] / 2**20, 2)]
                                for b in largest], f"the {len(largest)} largest buffers live at the peak")
        sizes = {b["bytes"] for b in largest}
        if len(largest) > 1 and len(sizes) == 1:    # bars of one length say nothing a line does not
            out.append(f'<div class="chart" role="group" aria-label="largest buffers"><p>the {len(largest)} '
                       f"largest buffers live at the peak are all {_e(mib(sizes.pop()))}</p>{numbers}</div>")
        else:
            labels = [f"{b['shape']} {b['instruction']}" for b in largest]
            out.append(charts.chart(charts.barh(labels, [b["bytes"] / 2**20 for b in largest], "MiB",
                                                "largest buffers at peak", "#8e44ad"), numbers, "largest buffers"))
    return out


def head(title: str, extra: str = "") -> str:
    """The document's start: charset, viewport, title, the report's CSS (inline, or `extra` in its place)."""
    style = extra or f"<style>{CSS}</style>"
    return ("<!DOCTYPE html><html lang=en><head><meta charset=utf-8>"
            '<meta name=viewport content="width=device-width, initial-scale=1">'
            f"<title>{_e(title)}</title>{style}</head>")


def page(title: str, body: str) -> str:
    from ..version import __version__
    return (head(title) + "<body>"
            f"<h1>{_e(title)}</h1><p class=meta>advisor {_e(__version__)}</p>{body}</body></html>\n")


def render_report(documents: list[dict], read_from: str, command: str = "analyze", failed: list[dict] = (),
                  check=None) -> str:
    """The HTML of the runs' result documents (analyze, run-workload, trace; failed: [{"path", "reason"}]
    of the runs that could not be read); `check`: the CheckResult of `advisor check`, whose verdict leads
    the page."""
    import matplotlib

    with matplotlib.rc_context(STYLE):
        return _render_report(documents, read_from, command, list(failed), check)


def _verdict(check) -> str:
    failed = [c for c in check.checks if not c.passed]
    items = "".join(f"<li><code>{_e(c.name)}</code>: {_e(c.message)}</li>" for c in failed)
    return (f'<section class="verdict"><h2>advisor check {"passed" if check.passed else "failed"}</h2>'
            + (f"<ul>{items}</ul>" if items else f"<p>all {len(check.checks)} checks passed</p>") + "</section>")


def _render_report(documents: list[dict], read_from: str, command: str, failed: list[dict], check) -> str:
    docs = json.loads(json_report.render(documents, read_from, command, failed=failed))     # as the JSON has them
    parts = ([_verdict(check)] if check is not None else []) + [_run(doc, d.get("views"))
                                                                 for doc, d in zip(docs["runs"], documents)]
    if docs["failed"]:
        parts.append("<h2>Runs not analyzed</h2><ul>" + "".join(
            f"<li><code>{_e(f['path'])}</code>: {_e(f['reason'])}</li>" for f in docs["failed"]) + "</ul>")
    return page(f"advisor {command}: {read_from}", "".join(parts))


def render_compare(results: list, base: str, new: str) -> str:
    """The HTML of `advisor compare`: results are (name, Comparison) pairs."""
    import matplotlib

    with matplotlib.rc_context(STYLE):
        return _render_compare(results, base, new)


def _render_compare(results: list, base: str, new: str) -> str:
    return page(f"advisor compare: {base} → {new}", "".join(_compare_section(name, c) for name, c in results))


def compare_section(name: str, comparison) -> str:
    """One pair of runs compared (a compare.Comparison): measures, category chart, findings gained and lost."""
    import matplotlib

    with matplotlib.rc_context(STYLE):
        return _compare_section(name, comparison)


def _compare_section(name: str, c) -> str:
    d = c.to_json()
    rows = [["step time (ms)", _num(d["base"]["step_time_ms"]), _num(d["new"]["step_time_ms"]),
             _x(d["step_time_ratio"])],
            ["peak memory (MiB)", _num(_m(d["base"]["peak_memory_bytes"]), 1),
             _num(_m(d["new"]["peak_memory_bytes"]), 1), _x(d["peak_memory_ratio"])]]
    if c.base.mfu is not None or c.new.mfu is not None:      # the text compare's MFU row, and its peak
        rows.append(["MFU", _pct(c.base.mfu), _pct(c.new.mfu), _x(c.mfu_ratio)])
    caption = f"step-time noise (relative spread): {_pct(d['step_time_noise'])}" + (
        f"; MFU against {c.mfu_peaks()}" if c.mfu_peaks() else "")
    cats = sorted(d["category_ratios"])
    b = [d["base"]["category_ms_per_step"].get(k, 0.0) for k in cats]
    n = [d["new"]["category_ms_per_step"].get(k, 0.0) for k in cats]
    fig, ax = charts.figure(6.5, 0.4 * len(cats) + 1.0)
    y = list(range(len(cats)))[::-1]
    ax.barh([v + 0.2 for v in y], b, height=0.4, color="#9aa5b1", label="base")
    ax.barh([v - 0.2 for v in y], n, height=0.4, color="#2e86c1", label="new")
    ax.set_yticks(y, [escape.mathtext(k) for k in cats])
    ax.set_xlabel("ms per step")
    ax.legend()
    ax.set_title("op time by category: base and new", loc="left")
    return (f"<h2>{_e(name)}</h2>" + _compare_head(c)
            + charts.table(["measure", "base", "new", "new / base"], rows, caption)
            + charts.chart(charts.svg(fig), charts.table(["category", "base ms", "new ms", "new / base"],
                                       [[k, _num(bb), _num(nn), _x(d["category_ratios"][k])]
                                        for k, bb, nn in zip(cats, b, n)],
                                       "op time by category per step"), "category deltas")
            + f"<p>findings added: {_e(', '.join(d['findings_added']) or 'none')}; removed: "
              f"{_e(', '.join(d['findings_removed']) or 'none')}</p>" + _ops_table(c.ops))


def _ops_table(diff) -> str:
    """Every op whose time per step or bytes at the memory peak changed (advisor/op_diff.py)."""
    if diff is None:
        return ""
    if diff.missing:
        return f"<p>ops: not compared: {_e(diff.missing)}</p>"
    if not diff.changed:
        return f"<p>ops: the same in both runs ({diff.unchanged} matched)</p>"
    def num(v, digits: int = 2) -> str:
        return _num(v, digits) if v else "-"      # "-": not in that run
    rows = [[c.time, c.label, num(c.base_ms), num(c.new_ms), _x(c.time_ratio), c.memory,
             num(_m(c.base_bytes), 1), num(_m(c.new_bytes), 1), c.source or "", c.name] for c in diff.changed]
    # long op names and paths fold inside their cells: the table fits the page's width
    return '<div class="ops">' + charts.table(
        ["time", "op", "base ms", "new ms", "new / base", "at the peak", "base MiB", "new MiB", "source",
         "op_name or HLO fingerprint"], rows,
        f"ops that changed, per step, most time changed first ({len(diff.changed)} changed, "
        f"{diff.unchanged} the same); matched by {op_diff.MATCHED}") + "</div>"


def _compare_head(c) -> str:
    """What ran on each side and what changed, then the step-time verdict against the runs' noise."""
    runs = "".join(f"<li>{_e(line)}</li>" for line in c.runs_text())
    return ((f"<ul class=meta>{runs}</ul>" if runs else "")
            + f'<p class="verdict"><b>{_e(c.step_time_verdict())}</b></p>')


def _num(v, digits: int = 2) -> str:
    return "n/a" if v is None else f"{v:,.{digits}f}"


def _x(ratio) -> str:
    return "n/a" if ratio is None else f"x{ratio:.2f}"


def _pct(share) -> str:
    return "n/a" if share is None else f"{share * 100:.1f}%"


def _m(b: Optional[int]) -> Optional[float]:
    return round(b / 2**20, 1) if b else None
