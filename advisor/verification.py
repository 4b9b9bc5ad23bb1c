"""Advice checked before it is given: each recommended change compiled, or re-run and measured.

Three levels, recorded on each recommendation as `checked` with the figures in `check`:
- compiled (advisor/compiled_advice.py, every `run-workload`, `analyze --compile-check`): the
  bundled workload compiled with the change applied, nothing run.
- measured (`verify_workload`, `run-workload --verify`): the change is applied alone, the
  workload re-run and profiled, the promised metric compared beyond the runs' own noise (step
  time: the spread of the profiled steps; peak memory: the buffer assignment, exact). Changes
  that should not alter the model's function (unrolling a scan, remat, donation, accumulation)
  must give the same loss on the same initial parameters; a mismatch is reported as a bug.
- estimated: the trace alone (the user's own code, where there is no config to vary);
  `advisor.verify(make_step, changes)` compiles the user's own variants.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Callable, Iterable, Optional, Union

from advisor.workloads.config import as_items

from .compare import compare, metrics
from .compiled_advice import MEMORY_GAIN, refute, run_metadata, sets
from .engine import analyze_path
from .findings import Expected
from .job import Analysis
from .locate import RUN_METADATA
from .remedies import CHANGES_NUMERICS
from .runner import profile_workload
from .units import mib
from .workload_memory import OutOfMemory

LOSS_RTOL = 1e-4


def verify_workload(name: str, preset: str, overrides: list[str], before: Analysis, logdir: Path,
                    progress: Callable[[str], None] = lambda m: None,
                    memory_limit: Optional[int] = None) -> list[dict]:
    """Re-run with each finding's config change, and each alternative a rule offers (a refuted change
    too: its figures become measured): profiled once each for its memory, loss and findings, and timed
    against the run as it is with the paired engine (advisor/timing.py). A finding keeps the change
    that measured best; the findings are then ranked by what was measured (rank_measured)."""
    changes: list[dict] = []
    for finding in before.findings:
        for change in _changes(finding):
            if change not in changes:
                changes.append(change)
    runs = {}
    for change in changes:
        progress(f"verifying: re-running with {' '.join(as_items(change))}")
        runs[_key(change)] = _profile(name, preset, overrides + as_items(change), logdir, progress, memory_limit)
    timed = _time(name, preset, overrides, [c for c in changes if "error" not in runs[_key(c)]], progress)
    results = []
    base_metrics = metrics(before.document())
    for finding in before.findings:
        tried = _changes(finding)
        if not tried:
            continue
        records = [_record(before, base_metrics, finding, change, runs[_key(change)], timed.get(_key(change)))
                   for change in tried]
        _keep_best(finding, tried, records)
        results.append(finding.verified)
    rank_measured(before.findings)
    return results


def _changes(finding) -> list[dict]:
    """The config changes a finding proposes: its recommendation's (or the refuted one), then its alternatives."""
    rec = finding.recommendation
    first = rec.config or (rec.refuted or {}).get("config")
    return [first, *(a["config"] for a in rec.alternatives if a["config"] != first)] if first else []


def _key(change: dict) -> str:
    return " ".join(as_items(change))


def _profile(name, preset, items, logdir, progress, memory_limit):
    """The change's run, analyzed; {"error": ...} where it ran out of memory."""
    from advisor import workloads

    try:
        run_dir = profile_workload(name, preset, workloads.resolve(name, preset, items), logdir, progress, memory_limit)
    except OutOfMemory as err:
        return {"error": f"out of memory: needs {err.required} bytes of {err.capacity}", "oom": err}
    (after,) = analyze_path(run_dir)
    return {"analysis": after, "run_dir": run_dir}


def _time(name, preset, overrides, changes, progress) -> dict:
    """Each change timed against the run as it is, one after the other, by the paired engine."""
    from .errors import AdvisorError
    from .timing import Reference

    if not changes:
        return {}
    spec = lambda items: {"workload": name, "preset": preset, "overrides": items}  # noqa: E731
    out: dict = {}
    progress(f"timing {len(changes)} change(s) against the run as it is: interleaved paired rounds")
    try:
        with Reference(spec(list(overrides))) as ref:
            for change in changes:
                try:
                    out[_key(change)] = ref.time(spec(overrides + as_items(change)), _key(change), progress)
                except AdvisorError as err:
                    out[_key(change)] = err
    except AdvisorError as err:       # the reference's workers failed: no change can be timed
        return dict.fromkeys(map(_key, changes), err)
    return out


def _record(before, base_metrics, finding, change, run, measured) -> dict:
    """The verified record of one change: step time from the paired engine, memory, loss and findings
    from its profiled run."""
    rec = finding.recommendation
    if "error" in run:
        return {"change": change, "improved": False, "error": run["error"]}
    after = run["analysis"]
    c = compare(base_metrics, metrics(after.document()))
    promised = rec.expected.metric
    compiled = [run_metadata(before).get("required_bytes"), run_metadata(after).get("required_bytes")]
    if c.peak_memory_ratio is not None:
        memory_improved = c.peak_memory_ratio < MEMORY_GAIN
    else:   # a program loaded from the compilation cache has no buffer assignment in its trace
        memory_improved = bool(all(compiled) and compiled[1] < MEMORY_GAIN * compiled[0])
    paired = measured if hasattr(measured, "verdict") else None
    faster = paired is not None and paired.verdict == "faster"
    improved = memory_improved if promised == "peak_memory" else faster
    loss_before, loss_after = run_metadata(before).get("initial_loss"), run_metadata(after).get("initial_loss")
    remedy = rec.remedy
    changes = remedy is None or remedy.kind in CHANGES_NUMERICS   # untyped: do not promise the same loss
    numerics = "changes numerics (dtype)" if changes else "same function"
    loss_match = None
    if loss_before is not None and loss_after is not None:
        loss_match = abs(loss_after - loss_before) <= LOSS_RTOL * max(abs(loss_before), 1.0)
    return {
        "change": change,
        "promised": promised,
        "improved": bool(improved),
        "step_time_ms": ([round(paired.base_ms, 3), round(paired.new_ms, 3)] if paired
                         else [c.base.step_time_ms, c.new.step_time_ms]),
        "step_time_ratio": round(paired.ratio, 4) if paired else None,
        "step_time_noise": round(paired.noise, 4) if paired else None,
        "step_time": paired.to_json() if paired else {"error": str(measured) if measured else "not timed"},
        "peak_memory_bytes": [c.base.peak_memory_bytes, c.new.peak_memory_bytes],
        "peak_memory_ratio": round(c.peak_memory_ratio, 4) if c.peak_memory_ratio else None,
        "memory_improved": memory_improved,
        "compiled_required_bytes": compiled,
        "numerics": numerics,
        "initial_loss": [loss_before, loss_after],
        "loss_match": loss_match,
        "bug": numerics == "same function" and loss_match is False,
        "findings_after": sorted(c.new.findings),
        "trace": str(run["run_dir"] / RUN_METADATA),
    }


def _gain_key(record: dict) -> tuple:
    """Best first: measured faster, by ratio; then the rest by ratio; then by memory; errors last."""
    if "error" in record:
        return (3, 0.0, 0.0)
    ratio = record["step_time_ratio"] if record["step_time_ratio"] is not None else 9.0
    verdict = record["step_time"].get("verdict")
    return (0 if verdict == "faster" else 1 if record["memory_improved"] else 2, ratio,
            record["peak_memory_ratio"] or 1.0)


def _keep_best(finding, tried: list[dict], records: list[dict]) -> None:
    """The finding keeps the change that measured best (its text and cost with it); what was measured
    for each is said on the checked line and kept in `verified`."""
    rec = finding.recommendation
    order = sorted(range(len(tried)), key=lambda i: _gain_key(records[i]))
    best = order[0]
    finding.verified = {**records[best]}
    if len(tried) > 1:
        finding.verified["alternatives"] = [records[i] for i in order[1:]]
        if best != 0 and rec.config:        # an alternative measured better: it becomes the fix
            alt = next(a for a in rec.alternatives if a["config"] == tried[best])
            rec.alternatives = [a for a in rec.alternatives if a is not alt] + [
                {"config": rec.config, "text": rec.text, "cost": rec.cost}]
            rec.text = (f"{alt['text']} (measured best of {len(tried)}: "
                        f"{'; '.join(_short(r) for r in (records[i] for i in order))})")
            rec.config, rec.cost = alt["config"], alt["cost"]
            won = records[best]
            if won.get("step_time_ratio"):     # the estimate was the first change's: say what this one measured
                st = won["step_time_ms"]
                rec.expected = Expected("step_time", round(st[0] - st[1], 3), "ms",
                                        f"measured: {st[0]:,.1f} -> {st[1]:,.1f} ms per step "
                                        f"(x{won['step_time_ratio']:.2f}, noise {won['step_time_noise']:.0%})")
    v = finding.verified
    figures = _measured(v) if "error" not in v else v["error"]
    others = "".join(f"; also tried {sets(r['change'])}: {_short(r)}" for r in v.get("alternatives", []))
    if "error" in v:
        if rec.config:
            refute(finding, "measured", f"re-run with {sets(v['change'])}: {v['error']}{others}")
        return
    verdict = v["step_time"].get("verdict")
    worse = verdict == "slower" and not v["memory_improved"]
    if rec.config and not v["improved"] and verdict != "faster" and (worse or v["promised"] == "peak_memory"):
        refute(finding, "measured", f"re-run with {sets(v['change'])}: {figures}{others}")
    else:
        rec.checked = "measured"
        rec.check = f"re-run with {sets(v['change'])}: {figures}{_verdict_words(v)}{others}"


def _short(record: dict) -> str:
    if "error" in record:
        return f"{_key(record['change'])}: {record['error']}"
    ratio, noise = record["step_time_ratio"], record["step_time_noise"]
    return f"{_key(record['change'])} x{ratio:.2f} ±{noise:.0%}" if ratio else f"{_key(record['change'])} not timed"


def _verdict_words(v: dict) -> str:
    verdict = v["step_time"].get("verdict")
    if verdict == "faster":
        return "; measured faster"
    if verdict == "slower":
        return "; measured slower" + (": worth it only for the memory" if v["memory_improved"] else "")
    if verdict == "within noise":
        return "; step time within the measurement's noise: not confirmed, not refuted"
    return ""


MEASURED_GAIN = 0.90     # a change measured at this ratio or below...
MEASURED_BAND = 0.95     # ...with its whole band below this is a warning, whatever the rule's estimate


def rank_measured(findings: list) -> None:
    """After --verify: severity from what was measured, then the findings ordered by measured gain.

    Severity: a change measured at x0.90 or faster with its band below x0.95 is at least a warning
    (a costly fix's trade-off is settled by the measurement); one measured slower or within noise,
    that did not bring the memory it promised either, is info. Order: the changes that measured faster,
    fastest first; then those that only brought memory, by memory ratio; then the findings not measured
    (by severity and share, as before); then the changes that did not help."""
    from .findings import SEVERITIES, sort_key

    def bucket(f) -> tuple:
        v = f.verified
        if not v or "error" in v or not f.recommendation.config:
            return (2 if not v else 3, 0.0, 0.0)
        return _gain_key(v)

    for f in findings:
        v = f.verified
        if not v or "error" in v or not f.recommendation.config:
            continue
        st = v["step_time"]
        if st.get("verdict") == "faster" and st["ratio"] <= MEASURED_GAIN and st["band"][1] < MEASURED_BAND:
            if SEVERITIES.index(f.severity) < SEVERITIES.index("warning"):
                f.severity = "warning"
                f.recommendation.text += (f"; --verify measured it faster (x{st['ratio']:.2f}, "
                                          f"noise {st['noise']:.0%}): worth it for the step time too")
        elif st.get("verdict") in ("slower", "within noise") and not v["memory_improved"]:
            f.severity = "info"
    findings.sort(key=lambda f: (bucket(f), sort_key(f)))


def _measured(verified: dict) -> str:
    """The checked line's figures, from the verified record as the report's table prints it: one
    rounding for both (the line printed "noise 13%" from 0.12503, the table "noise 12%" from 0.125)."""
    st, ratio, noise = verified["step_time_ms"], verified["step_time_ratio"], verified["step_time_noise"]
    step = (f"step {st[0]:,.1f} -> {st[1]:,.1f} ms (x{ratio:.2f}, noise {noise:.0%}), "
            f"{verified['step_time']['rounds']} interleaved paired rounds" if ratio and "step_time" in verified
            else f"step {st[0]:,.1f} -> {st[1]:,.1f} ms (x{ratio:.2f}, noise {noise:.0%})" if ratio
            else "step time not measured")
    pm, compiled = verified["peak_memory_bytes"], verified["compiled_required_bytes"]
    if pm[0] and pm[1]:
        peak = f"peak {mib(pm[0])} -> {mib(pm[1])}"
    elif all(compiled):
        peak = f"peak {mib(compiled[0])} -> {mib(compiled[1])} (the compiled steps' memory analysis)"
    else:
        peak = "peak memory not measured"
    return f"{step}, {peak}"


# --- the user's own code: compile both variants ------------------------------------------------


@dataclasses.dataclass
class Check:
    """One change compiled beside the step as it is today (nothing was run)."""
    change: dict
    base_bytes: int          # device memory the step needs today (arguments + outputs - aliased + temporaries)
    bytes: Optional[int]     # ... with the change; None where it did not compile
    error: Optional[str] = None
    step_time: Optional[dict] = None   # time=True: {"method", "ratio", "band", "rounds", "base_ms", "new_ms"}

    @property
    def improved(self) -> bool:
        return self.bytes is not None and self.bytes < MEMORY_GAIN * self.base_bytes

    @property
    def text(self) -> str:
        label = ", ".join(f"{k}={v!r}" for k, v in self.change.items()) or "(no change)"
        if self.bytes is None:
            return f"{label}: does not compile: {self.error}"
        verdict = "less memory" if self.improved else "no less memory"
        text = f"{label}: compiled, {mib(self.base_bytes)} -> {mib(self.bytes)}: {verdict}"
        t = self.step_time
        if t:
            text += (f"; step time x{t['ratio']:.2f} (90% band x{t['band'][0]:.2f}-x{t['band'][1]:.2f}, "
                     f"{t['base_ms']:,.1f} -> {t['new_ms']:,.1f} ms, median of {t['rounds']} interleaved rounds)")
        return text

    def to_json(self) -> dict:
        return {"change": self.change, "base_bytes": self.base_bytes, "bytes": self.bytes,
                "improved": self.improved, "error": self.error,
                "checked": "measured" if self.step_time else "compiled", "step_time": self.step_time}

    def __repr__(self) -> str:
        return f"<advisor.Check {self.text}>"


def _required(fn: Callable, args: Iterable[Any]) -> int:
    import jax

    from .api import _abstract

    shapes = jax.tree_util.tree_map(_abstract, tuple(args))
    jitted = fn if hasattr(fn, "lower") else jax.jit(fn)
    ma = jitted.lower(*shapes).compile().memory_analysis()
    return int(ma.argument_size_in_bytes + ma.output_size_in_bytes - ma.alias_size_in_bytes
               + ma.temp_size_in_bytes)


def verify(make_step: Callable[..., tuple], changes: Union[dict, Iterable[dict]], time: bool = False,
           rounds: int = 8, round_steps: int = 2, progress: Callable[[str], None] = lambda m: None) -> list[Check]:
    """Check recommended changes on your own code by compiling it with and without each one.

    make_step(**change) returns `(step, args)`: the step function (jitted or not; a jitted one keeps
    its donate_argnums) and its arguments (arrays or jax.ShapeDtypeStruct pytrees); called with no
    keyword for the step as it is today. Each variant is compiled and its memory read from XLA's
    buffer assignment.

    time=True also measures each variant's step time against today's: make_step must then be a
    function at the top of a .py file (the timing workers load that file by its path, as `advisor
    check --entry` does, with the calls to verify under `if __name__ == "__main__":`), its args
    arrays and the change's values JSON; each side runs in worker processes, in interleaved rounds
    (`rounds` of `round_steps` steps each, more when undecided: advisor/timing.py), every step on a
    fresh copy of the args. The ratio is the median of the rounds' paired ratios, with its band.
    """
    changes = [changes] if isinstance(changes, dict) else list(changes)
    fn, args = make_step()
    base = _required(fn, args)
    out = []
    for change in changes:
        try:
            fn, args = make_step(**change)
            out.append(Check(dict(change), base, _required(fn, args)))
        except Exception as exc:  # noqa: BLE001 - a variant that does not compile is the answer, not a crash
            out.append(Check(dict(change), base, None, f"{type(exc).__name__}: {str(exc).splitlines()[0]}"))
    if time:
        base_spec = _entry_spec(make_step)
        for check in out:
            if check.bytes is not None:
                check.step_time = _time_change(base_spec, check.change, rounds, round_steps, progress)
    return out


def _entry_spec(make_step: Callable) -> dict:
    """The spec a timing worker loads make_step from (advisor/entry.py): its file, by path."""
    import inspect
    import json
    import os

    from .entry import WORKER_ENV
    from .errors import AdvisorError

    if os.environ.get(WORKER_ENV):
        raise AdvisorError("advisor.verify(time=True) was called while a timing worker loaded your file: put "
                           "the call under `if __name__ == \"__main__\":`")
    try:
        path = inspect.getsourcefile(make_step)
    except TypeError:
        path = None
    name = getattr(make_step, "__qualname__", "")
    if not path or not os.path.isfile(path) or not name.isidentifier():
        raise AdvisorError("verify(time=True) times make_step in worker processes that load it from its file: "
                           "define it at the top of a .py file (not in a notebook cell, a lambda or a function)")
    spec = {"entry": f"{os.path.abspath(path)}:{name}", "cwd": os.getcwd()}
    json.dumps(spec)
    return spec


def _time_change(base_spec: dict, change: dict, rounds: int, round_steps: int, progress) -> dict:
    import statistics

    from .timing import measure, paired_verdict, start_sides

    sides = start_sides(base_spec, {**base_spec, "kwargs": dict(change)})
    try:
        timing = measure(*sides, 0.0, rounds, round_steps, progress)
    finally:
        for side in sides:
            side.close()
    v = paired_verdict(timing, 0.0)
    return {"method": "interleaved", "ratio": round(v.ratio, 4), "band": [round(v.low, 4), round(v.high, 4)],
            "rounds": v.rounds, "base_ms": round(statistics.median(min(b) for b in timing.base), 3),
            "new_ms": round(statistics.median(min(n) for n in timing.new), 3)}
