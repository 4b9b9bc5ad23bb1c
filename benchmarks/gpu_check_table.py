"""The GPU check's Markdown table (benchmarks/gpu_check.py): advisor's figures beside the paper
counts and the untraced timings, and the measured gains beside advisor's advice."""

from __future__ import annotations

from typing import Optional

from gpu_check_programs import PAIRS


def cell(text: object) -> str:
    """Text from a run (advisor's findings and verdicts) as one inert table cell."""
    return str(text).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ").replace("<", "&lt;")


def flop(x: Optional[float]) -> str:
    if x is None:
        return "-"
    return "0" if x == 0 else f"{x:.4g}".replace("e+", "e")


def ratio(a: Optional[float], b: Optional[float]) -> str:
    return f"x{a / b:.3f}" if a is not None and b else "-"


def ms(x: Optional[float]) -> str:
    if x is None:
        return "-"
    return f"{x:,.3f} ms" if x < 10 else f"{x:,.1f} ms"


def rate(x: Optional[float], unit: str = "FLOP/s") -> str:
    if x is None:
        return "-"
    for scale, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M")):
        if x >= scale:
            return f"{x / scale:,.3g} {prefix}{unit}"
    return f"{x:,.3g} {unit}"


def size(x: Optional[float]) -> str:
    if x is None:
        return "-"
    return f"{x / 2**30:,.2f} GiB" if x >= 2**30 else f"{x / 2**20:,.1f} MiB"


def pct(x: Optional[float]) -> str:
    return "-" if x is None else f"{x:.1%}"


def _peak(adv: dict, what: str) -> Optional[float]:
    peak = adv.get("peak") or {}
    return peak.get(what)


def _findings(adv: dict) -> str:
    return ", ".join(f["rule"] for f in adv.get("findings", [])) or "none"


def _program_row(key: str, r: dict) -> str:
    paper, adv = r["paper"], r["advisor"]
    if "error" in adv:
        return f"| {key} | {flop(paper['flops'])} | not analyzed: {cell(adv['error'])} |" + " |" * 8
    secs, adv_secs = r["untraced_ms"] / 1e3, (adv.get("step_time_ms") or 0) / 1e3
    mm, moved = adv.get("matmul_flops_per_step"), adv.get("bytes_per_step")
    if mm is None:
        got = "-"
    else:
        got = f"{flop(mm)} ({ratio(mm, paper['flops']) if paper['flops'] else '0 on paper' if not mm else '**not 0**'})"
    if mm is not None and paper["expect_ratio"] != 1.0:
        got += f", x{paper['expect_ratio']:.3f} expected"
    peak_f, peak_b = _peak(adv, "flops_per_s"), _peak(adv, "bytes_per_s")
    if paper["flops"]:
        ours, theirs = paper["flops"] / secs, (mm / adv_secs if mm is not None and adv_secs else None)
        achieved = f"{rate(ours)} / {rate(theirs)}"
        share = f"{pct(ours / peak_f) if peak_f else '-'} / {pct(adv.get('mfu'))}"
    elif paper["bytes"]:
        ours, theirs = paper["bytes"] / secs, (moved / adv_secs if moved is not None and adv_secs else None)
        achieved = f"{rate(ours, 'B/s')} / {rate(theirs, 'B/s')}"
        share = (f"{pct(ours / peak_b)} / {pct(theirs / peak_b) if theirs else '-'} of peak B/s" if peak_b
                 else "no peak")
    else:
        achieved, share = "-", "-"
    moved_text = size(moved) + (f" ({ratio(moved, paper['bytes'])})" if paper["bytes"] and moved is not None else "")
    return (f"| {key} | {flop(paper['flops'])} | {got} | {size(paper['bytes'])} | {moved_text} "
            f"| {ms(r['untraced_ms'])} | {ms(adv.get('step_time_ms'))} | {achieved} | {share} "
            f"| {cell(paper['bound'])} / {cell(adv.get('bound') or '-')} | {_findings(adv)} |")


def _workload_row(key: str, r: dict) -> str:
    paper, adv = r["paper"], r["advisor"]
    if "error" in adv:
        return f"| {key} | {flop(paper['model_flops'])} | not analyzed: {cell(adv['error'])} |" + " |" * 9
    peak_f = _peak(adv, "flops_per_s")
    mfu = paper["model_flops"] / (r["untraced_ms"] / 1e3) / peak_f if peak_f else None
    model, hw = adv.get("model_flops_per_step"), adv.get("matmul_flops_per_step")
    return (f"| {key} | {flop(paper['model_flops'])} | {flop(model)} ({ratio(model, paper['model_flops'])}) "
            f"| {flop(paper['flops'])} | {flop(hw)} ({ratio(hw, paper['flops'])}) | {ms(r['untraced_ms'])} "
            f"| {ms(adv.get('step_time_ms'))} | {pct(mfu)} | {pct(adv.get('mfu'))} | {cell(adv.get('bound') or '-')} "
            f"| {size(adv.get('peak_memory_bytes'))} | {_findings(adv)} |")


def _pair_row(label: str, first: str, second: str, rule: str, entries: dict) -> str:
    a, b = entries.get(first), entries.get(second)
    if a is None or b is None:
        missing = " and ".join(k for k, e in ((first, a), (second, b)) if e is None)
        return f"| {label} | {first} -> {second} | not measured ({missing} did not run) | | |"
    said = next((f for f in a["advisor"].get("findings", []) if f["rule"] == rule), None)
    advice = f"{said['severity']} `{rule}`: {cell(said['expected'])}" if said else f"`{rule}` silent"
    saving = a["untraced_ms"] - b["untraced_ms"]
    change = f"{abs(saving):,.2f} ms {'less' if saving >= 0 else 'more'}"
    return (f"| {label} | {first} -> {second} | {ms(a['untraced_ms'])} -> {ms(b['untraced_ms'])} "
            f"| x{b['untraced_ms'] / a['untraced_ms']:.3f} ({change}) | {advice} |")


def markdown(results: dict) -> str:
    env = results.get("environment", {})
    parts = results.get("parts_s", {})
    lines = [
        f"GPU check, preset `{results.get('preset')}`, on {env.get('device_kind')} ({env.get('backend')}), "
        f"jax {env.get('jax')}, advisor {env.get('advisor')}{' at ' + env['commit'] if env.get('commit') else ''}, "
        f"{env.get('date')}; XLA_FLAGS `{env.get('xla_flags') or '(none)'}`. Elapsed: "
        + ", ".join(f"{k} {v:.0f} s" for k, v in parts.items())
        + (f", {results['elapsed_s']:.0f} s in all." if results.get("complete") else "; **interrupted**."),
        "",
        "Untraced: the median of steps timed without the profiler, each blocked on. Paper counts: "
        "benchmarks/gpu_check_programs.py. MFU (paper) divides the paper count by the untraced step and "
        "advisor's peak (its source in advisor/<key>.json).",
        "",
    ]
    programs, rows = results.get("programs", {}), results.get("rows", {})
    if programs:
        lines += ["### Programs with known work", "",
                  "| program | paper matmul FLOP/step | advisor matmul FLOP/step (/ paper) | paper bytes/step "
                  "| advisor bytes/step (/ paper) | untraced step | advisor step | achieved: paper, untraced / advisor "
                  "| MFU (or bandwidth share): paper / advisor | bound: paper / advisor | findings |",
                  "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |"]
        lines += [_program_row(k, r) for k, r in programs.items()]
    if rows:
        lines += ["", "### The tutorial's Transformer rows", "",
                  "| row | paper model FLOP/step | advisor model FLOP/step (/ paper) | paper FLOP/step with remat "
                  "| advisor matmul FLOP/step (/ paper) | untraced step | advisor step | MFU (paper) | advisor MFU "
                  "| advisor bound | advisor peak memory | findings |",
                  "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | --- |"]
        lines += [_workload_row(k, r) for k, r in rows.items()]
    entries = {**programs, **rows}
    pairs = [p for p in PAIRS if p[1] in entries or p[2] in entries]
    if pairs:
        lines += ["", "### Measured gains beside advisor's advice", "",
                  "| change | keys | untraced step | measured (second / first) | advisor on the first |",
                  "| --- | --- | ---: | ---: | --- |"]
        lines += [_pair_row(*p, entries) for p in pairs]
    verify = results.get("verify")
    if verify and verify.get("findings") is not None:
        lines += ["", f"### `--verify` on {verify['row']} ({cell(rows[verify['row']]['command'])} --verify)", ""]
        lines += [f"- {f['severity']} `{f['rule']}` ({f['checked']}): {cell(f['check'])}" for f in verify["findings"]]
    lines += ["", "### Labels, verdicts and notes", ""]
    notes = {key: [r["paper"]["note"]] * bool(r["paper"].get("note")) + r["advisor"].get("notes", [])
             for key, r in entries.items()}
    common = set.intersection(*map(set, notes.values())) if len(notes) > 1 else set()
    for key, r in entries.items():
        adv = r["advisor"]
        lines.append(f"- {key}: {cell(r.get('command') or r['label'])}; advisor: "
                     f"{cell(adv.get('verdict') or adv.get('error') or 'no verdict')}"
                     + "".join(f"; {cell(n)}" for n in notes[key] if n not in common))
    if common:
        lines += ["", "Every run: " + "; ".join(cell(n) for n in sorted(common))]
    if results.get("skipped"):
        lines += ["", "Skipped:"] + [f"- {s['key']}: {cell(s['reason'])}" for s in results["skipped"]]
    return "\n".join(lines) + "\n"
