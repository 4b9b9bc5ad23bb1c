"""The terminal report: a summary per run, then findings by severity, most costly first within each."""

from __future__ import annotations

import urllib.parse
from pathlib import Path

from rich.console import Console
from rich.text import Text

from ..units import mib, si, size
from . import coverage, efficiency_text, layout, parallelism_text
from .escape import terminal

_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}
_SEVERITIES = ("error", "warning", "info")

FLEET_TABLE_MIN_RUNS = 4     # a report of at least this many runs ends with the fleet table
FLEET_TOP = 3                # runs named under the fleet table for the slowest steps and largest peaks
MAX_COLLECTIVES = 8     # rows of the collectives table


def _us(us: float) -> str:
    """A delay in µs, or in ms from 1 ms up (a launch queued 67 ms ahead read 67722.4 µs)."""
    return f"{us / 1e3:,.2f} ms" if us >= 1000 else f"{us:,.1f} µs"


def _row(rows: list, *cells) -> None:
    """Every cell as a Text: a string from the trace is never parsed as markup."""
    rows.append([c if isinstance(c, Text) else terminal("" if c is None else c) for c in cells])


def _line(console: Console, text: str, style: str = "") -> None:
    console.print(terminal(text, style))


def render(documents: list[dict], console: Console, failed: list[dict] = (), root: str = "") -> None:
    """documents: the runs' result documents (Analysis.document()), of which the report prints each
    `run`; failed: [{"path", "reason"}] of the runs that could not be read; root: what was given (run
    names in the fleet table are relative to it)."""
    docs = [d["run"] for d in documents]
    for doc in docs:
        render_run(doc, console)
    if len(docs) + len(failed) >= FLEET_TABLE_MIN_RUNS:
        fleet(docs, list(failed), console, root)


def render_plain(documents: list[dict], failed: list[dict] = (), root: str = "") -> str:
    """The report as plain lines (layout.py): what `--output FILE` writes, what a pipe gets, and what
    str(Report) returns."""
    import io

    buf = io.StringIO()
    con = layout.console(buf, terminal=False)
    render(documents, con, list(failed), root)
    con.file.flush()
    return buf.getvalue()


def render_run(doc: dict, console: Console) -> None:
    _summary(doc, console)
    _warnings(doc, console)
    _findings(doc, console)
    _verified(doc, console)
    console.print()


def run_name(path: str, root: str) -> str:
    """A run's path shortened for a table: relative to what was given, without plugins/profile."""
    if root.startswith("file://"):
        root = urllib.parse.unquote(urllib.parse.urlsplit(root).path)
    root = root.rstrip("/") if "://" in root else str(Path(root)) if root else ""
    name = path[len(root):].lstrip("/") if root and path.startswith(root) else path
    name = name.replace("plugins/profile/", "").removesuffix(".xplane.pb")
    return name or path


def fleet(docs: list[dict], failed: list[dict], console: Console, root: str = "") -> None:
    """One row per run, by path: findings by severity, step time, peak memory; then the slowest
    steps and the largest peaks of the fleet."""
    title = f"fleet: {len(docs) + len(failed)} runs" + (f", {len(failed)} not analyzed" if failed else "")
    ran = _fleet_labels(docs)
    if not any(ran.values()):
        ran = {}
    cols = [layout.Col("run", wrap=True)] + ([layout.Col("workload and settings", wrap=True, drop=1)] if ran else [])
    cols += [layout.Col(sev if sev == "info" else f"{sev}s", number=True) for sev in _SEVERITIES]
    cols += [layout.Col("step time", number=True), layout.Col("peak memory", number=True),
             layout.Col("rules that fired", wrap=True)]
    rows = [(d["path"] or "", d) for d in docs] + [(f["path"], f) for f in failed]
    cells = []
    totals = dict.fromkeys(_SEVERITIES, 0)
    for path, item in sorted(rows, key=lambda r: r[0]):
        if "reason" in item:
            reason = item["reason"].removeprefix(f"{path}: ")
            cells.append([terminal(run_name(path, root)), *([""] if ran else []), "", "", "", "", "",
                          terminal(f"not analyzed: {reason}", "red")])
            continue
        counts = {sev: sum(f["severity"] == sev for f in item["findings"]) for sev in _SEVERITIES}
        for sev in _SEVERITIES:
            totals[sev] += counts[sev]
        s = item["summary"]
        step = f"{s['step_time_ms']:,.2f} ms" if s.get("step_time_ms") is not None else "-"
        peak = mib(s["peak_memory_bytes"]) if s.get("peak_memory_bytes") is not None else "-"
        fired = ", ".join(dict.fromkeys(f["rule"] for f in item["findings"]))
        cells.append([terminal(run_name(path, root)), *([terminal(ran[path])] if ran else []),
                      *(Text(str(counts[sev] or ""), style=_STYLE[sev]) for sev in _SEVERITIES), step, peak,
                      terminal(fired + (" (partial)" if item.get("warnings") else ""))])
    layout.table(console, title, cols, cells)
    _line(console, "findings: " + ", ".join(f"{totals[sev]} {sev}{'s' if totals[sev] != 1 else ''}"
                                            for sev in _SEVERITIES))
    by_step = sorted((d for d in docs if d["summary"].get("step_time_ms") is not None),
                     key=lambda d: (-d["summary"]["step_time_ms"], d["path"]))[:FLEET_TOP]
    if by_step:
        _line(console, "slowest steps: " + ", ".join(
            f"{run_name(d['path'], root)} ({d['summary']['step_time_ms']:,.2f} ms)" for d in by_step))
    by_peak = sorted((d for d in docs if d["summary"].get("peak_memory_bytes") is not None),
                     key=lambda d: (-d["summary"]["peak_memory_bytes"], d["path"]))[:FLEET_TOP]
    if by_peak:
        _line(console, "largest peaks: " + ", ".join(
            f"{run_name(d['path'], root)} ({mib(d['summary']['peak_memory_bytes'])})" for d in by_peak))


def _fleet_labels(docs: list[dict]) -> dict[str, str]:
    """Each run's workload and the settings that tell it from the other runs of that workload (a
    sweep's varied keys), by path; "" for a run no bundled workload recorded."""
    from ..run_label import from_summary, labels

    return {d["path"] or "": text for d, text in zip(docs, labels([from_summary(d["summary"].get("run"))
                                                                    for d in docs]))}


def _verified(doc: dict, console: Console) -> None:
    rows = [f for f in doc["findings"] if f.get("verified")]
    if not rows:
        return
    cols = [layout.Col("rule"), layout.Col("change", wrap=True), layout.Col("step time", wrap=True),
            layout.Col("peak memory", wrap=True), layout.Col("verdict", wrap=True), layout.Col("numerics", wrap=True)]
    cells = []
    for f in rows:
        for i, v in enumerate([f["verified"], *f["verified"].get("alternatives", [])]):
            cells.append(_verified_row(f["rule"] if i == 0 else "  (also tried)", v))
    layout.table(console, "verified: each change applied alone, re-run, measured (step time: interleaved paired "
                          "rounds against the run as it is, noise: the ratio's 90% band)", cols, cells)


def _verified_row(rule: str, v: dict) -> list:
    change = terminal(" ".join(f"{k}={_value(x)}" for k, x in v["change"].items()))
    if "error" in v:
        return [terminal(rule), change, "", "", terminal(v["error"], "red"), ""]
    st = v["step_time_ms"]
    pm = v["peak_memory_bytes"]
    step = (f"{st[0]:,.1f} -> {st[1]:,.1f} ms (x{v['step_time_ratio']:.2f}, noise {v['step_time_noise']:.0%})"
            if v.get("step_time_ratio") else "not timed")
    req = v.get("compiled_required_bytes") or [None, None]
    peak = (f"{mib(pm[0])} -> {mib(pm[1])} (x{v['peak_memory_ratio']:.2f})" if pm[0] and pm[1]
            else f"{mib(req[0])} -> {mib(req[1])} (compiled)" if req[0] and req[1] else "n/a")
    promised = v["promised"].replace("_", " ")
    timed = (v.get("step_time") or {}).get("verdict")
    said = f"; step time {timed}" if timed and v["promised"] != "step_time" else ""
    verdict = (Text.assemble(("verified", "green"), terminal(f": {promised} improved{said}")) if v["improved"]
               else Text.assemble(("not verified", "yellow"), terminal(f": {promised} did not improve{said}")))
    loss = v["initial_loss"]
    if v["bug"]:
        numerics = Text(f"BUG: loss {loss[0]:.6f} -> {loss[1]:.6f}", style="red")
    elif v["numerics"] == "same function":
        numerics = f"same loss ({loss[0]:.6f})" if v["loss_match"] else "loss not recorded"
    else:
        numerics = f"changes numerics: loss {loss[0]:.6f} -> {loss[1]:.6f}"
    return [terminal(rule), change, step, peak, verdict, numerics]


def _summary(doc: dict, console: Console) -> None:
    s = doc["summary"]
    _line(console, doc["path"] or "(not run)", "bold")
    verdict = efficiency_text.verdict_line(doc)
    if verdict is not None:
        console.print(verdict)
    table: list = []
    _row(table, "backend", f"{doc['backend']} ({doc['device']})")
    if s.get("run"):
        r = s["run"]
        params = f", {r['num_params']:,} parameters" if r.get("num_params") else ""
        sets = "".join(f" {k}={v}" for k, v in (r.get("settings") or {}).items())
        if r.get("entry"):      # the user's own step (advisor check --entry)
            _row(table, "entry", str(r["entry"]))
        else:
            _row(table, "workload", f"{r.get('workload')} (preset {r.get('preset')}){sets}{params}")
    if s.get("recorded_with"):
        w = s["recorded_with"]
        parts = [f"{k.replace('_', ' ')} {w[k]}" for k in ("jax", "jaxlib", "cuda", "cuda_driver", "rocm") if k in w]
        if "command_buffers" in w:
            parts.append(f"command buffers {w['command_buffers']}")
        if "xla_flags" in w:
            parts.append(f"XLA_FLAGS={w['xla_flags']}" if w["xla_flags"] else "no XLA_FLAGS")
        if parts:
            _row(table, "recorded", "with " + ", ".join(parts))
    if doc["path"] is None:
        _row(table, "step time", "not run")
    elif s["step_time_ms"] is not None:
        spread = f", spread {s['step_time_spread_ms']:,.2f} ms" if s.get("step_time_spread_ms") is not None else ""
        source = "" if s.get("steps_from") in (None, "step annotations") else f" ({s['steps_from']})" \
            if s["steps_from"].startswith("the device work") else f" ({s['steps_from']}: no step annotations)"
        steps = f"{s['steps']} step{'s' if s['steps'] != 1 else ''}"
        _row(table, "step time", f"{s['step_time_ms']:,.2f} ms median over {steps}{spread}{source}")
    else:
        _row(table, "step time", "unknown: no step annotations (jax.profiler.StepTraceAnnotation) in the trace")
    if s.get("run", {}).get("step_wall_ms_median") is not None:
        _row(table, "wall time", f"{s['run']['step_wall_ms_median']:,.2f} ms median per step, measured by the runner")
    if s.get("op_time_per_step_ms") is not None:
        why = ""
        if s.get("step_time_ms") and s["op_time_per_step_ms"] > s["step_time_ms"]:
            devices = len(s.get("devices") or [])
            if doc.get("backend") in ("gpu", "tpu"):
                why = (" (more than the step time: op time is summed over kernels that run side by side: "
                       "several streams, or the concurrent kernels of a CUDA graph)")
            else:
                over = f"{devices} devices and their executor threads" if devices > 1 else "the executor's threads"
                why = f" (more than the step time: op time is summed over {over}, which run at once)"
        per = "per step" if s.get("steps") else "over the traced window (no steps)"
        _row(table, "op time", f"{s['op_time_per_step_ms']:,.2f} ms {per} in {s['step_module']}{why}")
    if s["peak_memory_bytes"] is not None:
        _row(table, "peak memory", f"{mib(s['peak_memory_bytes'])} ({s['peak_memory_source']})")
    else:
        _row(table, "peak memory", "unknown: the trace carries no buffer assignment for the step program")
    if s.get("device_capacity_bytes"):
        _row(table, "device memory", mib(s["device_capacity_bytes"]))
    for dev in s.get("devices", []):
        if "kernels" not in dev:
            continue
        # The plane's totals are over the whole traced window (every step, and what ran between): said
        # so, as every other line of the report is per step.
        cats = ", ".join(f"{k} {v:,.2f} ms" for k, v in list(dev["time_by_category_ms"].items())[:4])
        idle = f"; idle {dev['idle_in_steps_ms']:,.2f} ms in the steps" if "idle_in_steps_ms" in dev else ""
        if dev.get("launch_overhead_median_us") is not None:
            idle += (f"; launch overhead {_us(dev['launch_overhead_median_us'])} to start on an idle device "
                     f"(median of {dev['launches_matched'] - dev['launches_queued']:,} launches)")
        if dev.get("launch_call_median_us") is not None and dev.get("launches_matched"):
            idle += f"; the host's launch call {_us(dev['launch_call_median_us'])} (median)"
        if dev.get("launch_queue_median_us") is not None:
            idle += (f"; {dev['launches_queued']:,} of {dev['launches_matched']:,} launches queued behind earlier "
                     f"work: the host ran ahead of the device by {_us(dev['launch_queue_median_us'])} (median), "
                     "not launch latency")
        _row(table, dev["name"], dev["description"])
        _row(table, "", f"in the traced window: {dev['kernels']:,} kernels, {dev['kernel_time_ms']:,.2f} ms "
                        f"({dev['small_kernels']:,} under 10 µs), {dev['memcpys']:,} copies "
                        f"{dev['memcpy_time_ms']:,.2f} ms{idle}")
        if cats:
            _row(table, "", f"by category, in the traced window: {cats}")
    if s.get("devices_idle"):
        _row(table, "idle devices", ", ".join(s["devices_idle"]))
    for a in s.get("allocators", []):
        _row(table, "allocator", f"{a['allocator']}: peak {mib(a['peak_bytes'])} in use in the window "
                                   f"(lifetime peak {mib(a['lifetime_peak_bytes'])})")
    for entry in s.get("device_memory_profile", []):
        if entry["bytes"]:
            _row(table, "live at save", f"{mib(entry['bytes'])} in {entry['count']} {entry['kind']}s on "
                                           f"{entry['device'] or 'host'} (device memory profile)")
            for site in entry.get("largest_sites", [])[:2]:
                if site["bytes"] >= 0.01 * entry["bytes"]:
                    _row(table, "", f"{mib(site['bytes'])} allocated at {site['site']}")
    layout.pairs(console, table)
    _device_table(doc, console)
    parallelism_text.render(doc, console)
    for note in doc.get("notes", []):
        _line(console, f"note: {note}", "dim")
    efficiency_text.render(doc, console)


def _device_table(doc: dict, console: Console) -> None:
    """Per-device figures per step when the run has more than one device; the slowest marked."""
    devices = [d for d in doc["summary"].get("devices", []) if "compute_ms" in d]
    if len(devices) < 2:
        return
    hosts = len({d["host"] for d in devices})
    per = "mean per step" if all(d.get("steps") for d in devices) else "over the traced window, which has no steps"
    title = (f"{len(devices)} devices on {hosts} host{'s' if hosts > 1 else ''}: {per} "
             "(collective time split into transfer and waiting for peers)")
    cols = [layout.Col("device"), layout.Col("host", wrap=True)]
    cols += [layout.Col(c, number=True) for c in ("compute", "collective transfer", "collective wait", "idle",
                                                   "peak memory")]
    cols.append(layout.Col(""))
    rows: list = []
    for d in devices:
        peak = mib(d["peak_memory_bytes"]) if d.get("peak_memory_bytes") is not None else "unknown"
        _row(rows, d["name"], d["host"], f"{d['compute_ms']:,.2f} ms", f"{d['collective_transfer_ms']:,.2f} ms",
             f"{d['collective_wait_ms']:,.2f} ms", f"{d['idle_ms']:,.2f} ms", peak,
             Text("slowest", style="bold red") if d.get("slowest") else "")
    layout.table(console, title, cols, rows)
    collectives = doc["summary"].get("collectives") or []
    if not collectives:
        return
    shown = collectives[:MAX_COLLECTIVES]
    more = f", the {len(shown)} longest of {len(collectives)}" if len(collectives) > len(shown) else ""
    title = f"collectives per step on one device (mean over devices{more}; bytes from the HLO)"
    cols = [layout.Col("instruction", wrap=True), layout.Col("opcode", drop=2)]
    cols += [layout.Col(c, number=True) for c in ("per step", "bytes per device", "time per step", "transfer",
                                                   "wait")]
    cols.append(layout.Col("bandwidth", number=True, drop=1))
    rows = []
    for c in shown:
        _row(rows, c["instruction"], c["opcode"], f"{c['per_step']:g}", size(c["bytes_per_device"]),
             f"{c['time_ms']:,.2f} ms", f"{c['transfer_ms']:,.2f} ms", f"{c['wait_ms']:,.2f} ms",
             _bandwidth(c["algorithmic_gb_per_s"]))
    layout.table(console, title, cols, rows)


def _warnings(doc: dict, console: Console) -> None:
    """What could not be read: said before the findings, so a partial answer never looks complete."""
    prefix = f"{doc['path']}: "
    for w in doc.get("warnings", []):
        _line(console, f"PARTIAL: {w[len(prefix):] if w.startswith(prefix) else w}", "bold yellow")


def _findings(doc: dict, console: Console) -> None:
    findings = doc["findings"]
    rules = doc.get("rules") or {}
    ran, lacking = rules.get("ran", []), rules.get("could_not_run", [])
    if not findings:
        if not ran and not lacking:
            console.print(Text(coverage.NO_RULE_RAN, style="bold yellow"))
        elif lacking:
            _coverage(doc, console)
            if doc.get("warnings"):
                console.print(Text("The analysis is partial (see PARTIAL above).", style="bold yellow"))
        elif doc.get("warnings"):
            console.print(Text("No findings from the rules that could run; the analysis is partial "
                               "(see PARTIAL above).", style="bold yellow"))
        else:
            console.print(Text(f"No findings: none of the {len(ran) or 'applicable'} rules for {doc['backend']} "
                               "saw a problem in this run.", style="green"))
        return
    order = ("by measured gain (--verify: step time, then memory), the changes that did not help last"
             if any(f.get("verified") for f in findings) else "by severity, most costly first")
    console.print(Text(f"{len(findings)} finding{'s' if len(findings) > 1 else ''}, {order}:", style="bold"))
    for f in findings:
        head = Text()
        head.append(f"{f['severity']:<8}", style=_STYLE[f["severity"]])
        head.append(terminal(f"{f['rule']}  ", "bold"))
        head.append(terminal(f["title"]))
        console.print(head)
        rec = f["recommendation"]
        lines = [("fix:", terminal(rec["text"]))]
        if rec["config"]:
            lines.append(("config:", terminal(" ".join(f"--set {k}={_value(v)}" for k, v in rec["config"].items()))))
        lines += [("expected:", terminal(rec["expected"]["text"])), ("cost:", terminal(rec["cost"]))]
        if rec.get("checked"):
            lines.append(("checked:", terminal(f"{rec['checked']}: {rec['check']}")))
        for c in f["evidence"].get("candidates", []):     # the config changes that fit (memory_plan.py)
            change = " ".join(f"--set {k}={_value(v)}" for k, v in c["change"].items())
            est = mib(c["estimated_bytes"]) if c.get("estimated_bytes") else c.get("error", "?")
            lines.append(("candidate:", terminal(f"{change:<40} ~{est}  {'fits' if c['fits'] else 'does not fit'}")))
        if f.get("source"):
            lines.append(("source:", terminal(f["source"])))
        layout.indented(console, lines)
    _coverage(doc, console)      # most rules could not run: said beside the findings too


def _coverage(doc: dict, console: Console) -> None:
    """Which rules could not run, grouped by what the trace lacks, and which ran."""
    said = coverage.summary(doc)
    if said is None:
        return
    head, groups, ran = said
    console.print(Text(head + ":", style="bold yellow"))
    for why, ids in groups:
        _line(console, f"  {why}: {', '.join(ids)}")
    if ran:
        _line(console, f"  {ran}")


def _value(v) -> str:
    from advisor.workloads.config import format_value  # the one grammar of --set and --vary
    return format_value(v)


def _bandwidth(gb_per_s) -> str:
    """With an SI prefix: a small collective that mostly waits reads 512 kB/s, not 0.00 GB/s."""
    return "n/a" if gb_per_s is None else si(gb_per_s * 1e9, "B/s")
