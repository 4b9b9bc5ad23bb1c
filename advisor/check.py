"""The pre-merge check (`advisor check`): a run, read from its trace or recorded by a bundled workload,
against a baseline file, with budgets and a pass/fail verdict; with a workload, step time measured
for both sides interleaved (advisor/timing.py)."""

from __future__ import annotations

import dataclasses
import datetime
import json
import math
from pathlib import Path
from typing import Any, Callable, Optional

from . import safe_json
from .compare import Comparison, Metrics, compare, metrics
from .errors import AdvisorError
from .findings import SEVERITIES
from .job import Job
from .outputs import write_text
from .timing import PairedTiming, median_rounds, paired_verdict
from .units import mib
from .version import __version__

BASELINE_VERSION = 1


@dataclasses.dataclass
class Check:
    name: str           # "rule:<id>", "budget:step-time", "budget:peak-memory"
    passed: bool
    message: str
    level: str = "error"          # how CI shows it: "error", "warning" or "notice" (an info finding)
    source: Optional[str] = None  # file:line, for rule checks


@dataclasses.dataclass
class CheckResult:
    checks: list[Check]
    comparison: Optional[Comparison]
    document: dict                  # the checked run's result document (Analysis.document())
    evidence: Optional["StepTimeEvidence"] = None
    path: str = ""                  # what was read: the trace given, or the workload's run folder
    base_document: Optional[dict] = None    # --entry --base-dir: the base side's profiled run, the baseline

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)

    def to_json(self) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "checks": [dataclasses.asdict(c) for c in self.checks],
            "comparison": self.comparison.to_json() if self.comparison else None,
            "step_time": _evidence_json(self.evidence),
            "run": self.document["run"],
            **({"base_run": self.base_document["run"]} if self.base_document else {}),
        }


def _evidence_json(e: Optional["StepTimeEvidence"]) -> Optional[dict]:
    if e is None or (e.paired is None and not e.remeasured_ms):
        return None
    out: dict[str, Any] = {"method": "interleaved" if e.paired else "recorded", "base": e.base_label or None}
    if e.paired is not None:
        out.update(rounds_ms={"base": e.paired.base, "new": e.paired.new},
                   ratios=[round(r, 4) for r in e.paired.ratios()])
    if e.programs:
        out["programs"] = e.programs
    if e.remeasured_ms:
        out["remeasured_median_ms"] = e.remeasured_ms
    return out


def save_baseline(path: Path, document: dict, workload: Optional[dict] = None, kept: bool = True) -> None:
    """The baseline of a run's result document; kept: the trace stays where it was read (False: a
    temporary folder, removed after: not named)."""
    doc = {
        "schema_version": BASELINE_VERSION,
        "advisor_version": __version__,
        "created": datetime.datetime.now().isoformat(timespec="seconds"),
        "trace": document["run"]["path"] if kept else None,
        "workload": workload,
        "metrics": metrics(document).to_json(),
    }
    write_text(path, safe_json.dumps(doc, indent=2) + "\n")   # never a half-written baseline


def read_baseline_doc(path: Path) -> tuple[Metrics, Optional[dict]]:
    """The baseline's metrics, and the workload it ran ({"name", "preset", "overrides"}) when it
    recorded one: a baseline of a --workload check can be run again beside the candidate."""
    if not path.is_file():
        raise AdvisorError(f"{path}: no such baseline; create it with `advisor check ... --write-baseline {path}`")
    try:
        doc = json.loads(path.read_text(encoding="utf-8"), parse_constant=_not_a_number)
        bad = safe_json.non_finite(doc.get("metrics"))   # 1e999 reads as inf
        if bad:
            raise ValueError(f"not a finite number at metrics{bad[0].removeprefix('$')}")
        workload = doc.get("workload")
        if workload is not None and not (isinstance(workload.get("name"), str)
                                         and isinstance(workload.get("overrides", []), list)):
            raise TypeError("its workload is not {name, preset, overrides}")
        return Metrics.from_json(doc["metrics"]), workload
    except RecursionError:
        raise AdvisorError(f"{path}: not an advisor baseline (nested too deeply); "
                           "write it again with --write-baseline") from None
    except (ValueError, KeyError, TypeError, AttributeError) as err:
        raise AdvisorError(f"{path}: not an advisor baseline ({type(err).__name__}: {err}); "
                           "write it again with --write-baseline") from None


def _not_a_number(name: str):
    # a NaN budget figure compares false with everything: every regression would pass
    raise ValueError(f"{name} is not a number JSON allows")


@dataclasses.dataclass
class StepTimeEvidence:
    """How step time was measured beyond the run's own trace."""
    paired: Optional[PairedTiming] = None        # both sides timed interleaved in this job
    base_label: str = ""                         # what the base side was ("baseline config", "--base-python X")
    remeasured_ms: list[float] = dataclasses.field(default_factory=list)  # more medians of the candidate
    load: Optional[float] = None                 # 1-minute load average per core while the check ran
    programs: Optional[dict] = None              # per side, each timing worker's programs compiled / loaded


def run_check(document: dict, baseline: Optional[Metrics], fail_on: str,
              max_step_time_regression: float, max_memory_regression: float, rule_ids: list[str],
              evidence: Optional[StepTimeEvidence] = None, strict_time: bool = False,
              min_mfu: Optional[float] = None) -> CheckResult:
    """The checks of a run's result document against the baseline, the budgets and --fail-on."""
    evidence = evidence or StepTimeEvidence()
    new = metrics(document)
    comparison = None
    if baseline is not None:
        if (baseline.backend, baseline.device) != (new.backend, new.device):
            raise AdvisorError(
                f"the baseline was measured on {baseline.backend} ({baseline.device}) and this run on "
                f"{new.backend} ({new.device}): comparing them would mislead; write a baseline on this kind "
                "of machine with --write-baseline")
        comparison = compare(baseline, new)
    checks = []
    threshold = SEVERITIES.index(fail_on)
    by_rule = {}
    for f in document["run"]["findings"]:
        by_rule.setdefault(f["rule"], []).append(f)
    for rule in rule_ids:
        found = by_rule.get(rule, [])
        worst = max(found, key=lambda f: SEVERITIES.index(f["severity"]), default=None)
        is_new = comparison is not None and rule in comparison.findings_added
        too_severe = worst is not None and SEVERITIES.index(worst["severity"]) >= threshold
        if worst is None:
            checks.append(Check(f"rule:{rule}", True, "no finding"))
        elif too_severe or is_new:
            why = "new since the baseline" if is_new else f"severity {worst['severity']} >= --fail-on {fail_on}"
            checks.append(Check(f"rule:{rule}", False, f"{worst['title']} ({why})", "error", worst.get("source")))
        else:
            why = "also in the baseline" if comparison is not None else f"below --fail-on {fail_on}"
            level = "notice" if worst["severity"] == "info" else "warning"
            checks.append(Check(f"rule:{rule}", True, f"{worst['severity']}: {worst['title']} ({why})",
                                level, worst.get("source")))
    if evidence.paired is not None:
        checks.append(paired_time_check(evidence, max_step_time_regression))
    elif comparison is not None:
        checks.append(recorded_time_check(comparison, max_step_time_regression, evidence, strict_time))
    if comparison is not None:
        checks.append(_memory_check(comparison, max_memory_regression))
    if min_mfu is not None:
        checks.append(mfu_check(new, min_mfu, comparison.base if comparison is not None else None))
    for c in checks:
        if not c.passed and comparison is not None and comparison.ops is not None:
            _name_grown_op(c, comparison.ops)
    return CheckResult(checks=checks, comparison=comparison, document=document, evidence=evidence)


def mfu_check(new: Metrics, min_mfu: float, base: Optional[Metrics] = None) -> Check:
    """--min-mfu: the step's MFU (summary.efficiency) at least this share of the named peak."""
    before = f" (baseline {base.mfu:.1%})" if base is not None and base.mfu is not None else ""
    if new.mfu is None:
        return Check("budget:mfu", False, f"MFU unknown (no peak for this device, or no step time): give "
                                          f"--peak-flops and --peak-bandwidth, or run advisor calibrate{before}")
    return Check("budget:mfu", new.mfu >= min_mfu,
                 f"MFU {new.mfu:.1%} against {new.mfu_peak}{before}; at least {min_mfu:.1%} asked")


def paired_time_check(evidence: StepTimeEvidence, threshold: float) -> Check:
    """Both sides timed in this job, interleaved: judged on the paired per-round ratios."""
    v = paired_verdict(evidence.paired, threshold)
    if not v.judged:
        return Check("budget:step-time", True, f"step time not judged: {v.why}", "warning")
    middle = median_rounds(evidence.paired)
    figures = " and ".join(f"{b:,.1f} ms -> {n:,.1f} ms" for _, b, n in middle)
    which = (f"round {middle[0][0]}, the median round" if len(middle) == 1 else
             f"rounds {middle[0][0]} and {middle[1][0]}, the two middle rounds, whose ratios' mean is the median")
    text = (f"step time x{v.ratio:.3f}, the median of {v.rounds} interleaved rounds' ratios (each round: the "
            f"candidate's fastest step over the base's; 90% band x{v.low:.3f}-x{v.high:.3f}) against the "
            f"{evidence.base_label}; fastest steps {figures} ({which}); budget +{threshold:.0%}")
    return Check("budget:step-time", not v.regressed, text)


def recorded_time_check(c: Comparison, threshold: float, evidence: StepTimeEvidence, strict: bool) -> Check:
    """Against step times recorded at another moment: a pass is a pass; a failure stands only
    when the measurements are comparable, otherwise it is a warning (a failure with strict)."""
    if c.step_time_ratio is None:
        return Check("budget:step-time", not strict, "step time unknown in one of the runs: not judged", "warning")
    new_ms = min([c.new.step_time_ms, *evidence.remeasured_ms])
    ratio = new_ms / c.base.step_time_ms
    which = (f"the fastest of {1 + len(evidence.remeasured_ms)} medians of this run" if evidence.remeasured_ms
             else "the median step")
    text = (f"step time {c.base.step_time_ms:,.2f} ms -> {new_ms:,.2f} ms (x{ratio:.3f}, {which} against the "
            f"baseline's median step; budget +{threshold:.0%}, measured noise {c.noise:.0%}; against a baseline "
            "recorded at another moment)")
    if ratio - 1 <= threshold + c.noise:
        return Check("budget:step-time", True, text)
    medians = [c.new.step_time_ms, *evidence.remeasured_ms]
    why = not_comparable(c.noise, medians, evidence.load, threshold)
    if not why:
        return Check("budget:step-time", False, text)
    explained = noise_band(c.noise, medians, evidence.load, threshold)
    if ratio > explained:
        return Check("budget:step-time", False,
                     f"{text}: slower than the disturbance measured could explain (it could explain up to "
                     f"x{explained:.2f}: the budget, and the largest disturbance once for each run), although "
                     f"the measurements are not comparable ({why})")
    return Check("budget:step-time", not strict,
                 f"step time not judged: the measurements are not comparable ({why}); x{ratio:.3f} is within "
                 f"the x{explained:.2f} they could explain; {text}", "warning")


def noise_band(noise: float, medians: list[float], load: Optional[float], threshold: float) -> float:
    """The largest ratio against a recorded baseline that the machine could explain: the budget, times
    the largest disturbance measured (the steps' spread, the repeated medians' difference, the load
    per core beyond this process) once for each run, as the baseline's run may have been quiet and
    this one disturbed, or the other way round. A user's step slowed from 231 to 792 ms (x3.43) with
    44% spread is beyond x1.1 x 1.44^2 = x2.28: a regression, not the machine."""
    disturbance = max(noise, max(medians) / min(medians) - 1 if len(medians) > 1 else 0.0, load or 0.0)
    return (1 + threshold) * (1 + disturbance) ** 2


def not_comparable(noise: float, medians: list[float], load: Optional[float], threshold: float) -> str:
    """Why a slower step time against a recorded baseline may be the machine, not the code ('' if no reason)."""
    reasons = []
    if noise > threshold:
        reasons.append(f"the steps of one run spread {noise:.0%}, more than the {threshold:.0%} budget")
    if len(medians) > 1 and max(medians) / min(medians) - 1 > threshold:
        reasons.append(f"{len(medians)} measurements of this run differ by {max(medians) / min(medians) - 1:.0%}")
    if load is not None and load >= 0.5:
        reasons.append(f"other processes kept the CPU busy (load {load:.2f} per core)")
    return "; ".join(reasons)


def _memory_check(c: Comparison, threshold: float) -> Check:
    if c.peak_memory_ratio is None:
        return Check("budget:peak-memory", True, "peak memory unknown in one of the runs: not judged", "warning")
    text = (f"peak memory {mib(c.base.peak_memory_bytes)} -> {mib(c.new.peak_memory_bytes)} "
            f"(x{c.peak_memory_ratio:.3f}; budget +{threshold:.0%})")
    return Check("budget:peak-memory", not c.memory_regressed(threshold), text)


def _name_grown_op(c: Check, ops) -> None:
    """A failing step-time or peak-memory check names the op that grew most since the baseline, and
    points at its source line (the annotation's file and line in CI)."""
    what = {"budget:step-time": "time", "budget:peak-memory": "memory"}.get(c.name)
    if what is None:
        return
    if ops.missing:
        c.message += f"; which ops grew: not known ({ops.missing})"
        return
    op = ops.grew_most(what)
    if op is None:
        return
    named = [op] + [o for o in [ops.grew_most(what, with_source=True)] if o is not None and o is not op]
    c.message += "; the op that grew most: " + "; with a source line: ".join(_grown(o, what) for o in named)
    c.source = c.source or named[-1].source


def _grown(op, what: str) -> str:
    if what == "time":
        ratio = f" (x{op.time_ratio:.2f})" if op.time_ratio is not None else ""
        figures = f"{op.base_ms:,.2f} -> {op.new_ms:,.2f} ms per step{ratio}"
    else:
        figures = f"{mib(op.base_bytes) if op.base_bytes else 'none'} -> {mib(op.new_bytes)} live at the peak"
    return f"{op.label}, {figures}" + (f", at {op.source}" if op.source else "")


def parse_percent(text: str, name: str) -> float:
    t = text.strip()
    try:
        value = float(t[:-1]) / 100 if t.endswith("%") else float(t)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise AdvisorError(f"{name} expects a percentage like 10% or a fraction like 0.1, got {text!r}")
    return value


@dataclasses.dataclass(frozen=True)
class Request:
    """What `advisor check` was asked: the run (a trace, or a bundled workload to record), the
    baseline to compare with or write, the budgets and how step time is measured."""
    job: Job                                # the rules and their settings
    path: Optional[str] = None              # the trace (one run), or
    workload: Optional[str] = None          # the bundled workload to record and check
    preset: str = "tiny"
    overrides: tuple[str, ...] = ()
    steps: Optional[int] = None
    logdir: Optional[Path] = None           # where the workload's trace goes (None: a temporary folder)
    baseline: Optional[Path] = None
    write_baseline: Optional[Path] = None
    fail_on: str = "error"
    step_budget: float = 0.10
    memory_budget: float = 0.05
    min_mfu: Optional[float] = None
    base_python: Optional[str] = None       # the interpreter that times the base side
    rounds: int = 8
    round_steps: int = 2
    strict_time: bool = False
    allow_partial: bool = False
    entry: Optional[str] = None             # or the user's step, FILE.py:FUNCTION or module:function (advisor/entry.py)
    base_dir: Optional[Path] = None         # with entry: the base branch's checkout, the same entry relative to it

    @property
    def items(self) -> list[str]:
        return list(self.overrides) + ([f"train.steps={self.steps}"] if self.steps is not None else [])



def run(request: Request, progress: Callable[[str], None], note: Callable[[str], None]) -> Optional[CheckResult]:
    """The check: the run read (or the workload or the user's --entry recorded), the baseline written
    where asked (None when that is all there is to do), step time measured for both sides where the
    baseline records its workload (or --base-python; for --entry, --base-dir or --base-python: the
    base side's profiled run is then the baseline), and judged; a slower step time against a recorded baseline is
    measured again before it is believed. `note`: the lines the user always sees."""
    import contextlib
    import os

    from . import cleanup
    from .timing import confirm, measure, programs_by_side, remeasure, start_sides

    r = request
    base, base_workload = read_baseline_doc(r.baseline) if r.baseline else (None, None)
    from advisor import rules as catalog

    rule_ids = [rule.id for rule in (catalog.ALL if r.job.rules is None else r.job.rules)]
    evidence, workers, path, workload_info = StepTimeEvidence(), [], r.path, None
    base_path = base_document = None
    try:
        with contextlib.ExitStack() as stack:
            tmp = cleanup.mkdtemp("check")
            stack.callback(cleanup.remove, tmp)
            if r.workload:
                from advisor import workloads

                from .runner import profile_workload

                config = workloads.resolve(r.workload, r.preset, r.items)
                new_spec = {"workload": r.workload, "preset": r.preset, "overrides": list(r.overrides)}
                if r.base_python or (base is not None and base_workload):
                    base_spec = ({"workload": base_workload["name"], "preset": base_workload.get("preset", "tiny"),
                                  "overrides": list(base_workload.get("overrides", []))}
                                 if base_workload else new_spec)
                    if r.base_python:
                        evidence.base_label = f"base side run by {r.base_python}"
                    else:
                        evidence.base_label = "baseline's configuration (" + " ".join(
                            [base_spec["workload"], base_spec["preset"], *base_spec["overrides"]]) + ")"

                    def start_pair():
                        return start_sides(base_spec, new_spec, r.base_python)
                    workers = start_pair()      # started now: they compile while this process profiles the candidate
                path = profile_workload(r.workload, r.preset, config, r.logdir or Path(tmp), progress)
                workload_info = {"name": r.workload, "preset": r.preset, "overrides": r.items}
            if r.entry:
                from .entry import profile_sides

                path, base_path, new_spec, base_spec = profile_sides(r, Path(tmp), progress)
                if base_spec is not None:
                    evidence.base_label = "base side (" + (f"{r.base_dir}" if r.base_dir else "this checkout") + (
                        f", run by {r.base_python})" if r.base_python else ")")

                    def start_pair():
                        return start_sides(base_spec, new_spec, r.base_python)
                    workers = start_pair()
            document = _one_document(path, r)
            if base_path is not None:     # the base side's run is the baseline: findings and memory, exactly
                base_document = _one_document(base_path, r)
                base = metrics(base_document)
            if r.write_baseline:
                save_baseline(r.write_baseline, document, workload_info,
                              kept=not ((r.workload or r.entry) and r.logdir is None))
                note(f"advisor: baseline written to {r.write_baseline}")
                if not base and not workers:
                    return None
            if workers:
                first = measure(*workers, r.step_budget, r.rounds, r.round_steps, progress)
                evidence.paired, again = confirm(first, start_pair, r.step_budget, r.rounds, r.round_steps, progress)
                workers += again
                evidence.programs = programs_by_side(workers)

            def judged():
                return run_check(document, base, r.fail_on, r.step_budget, r.memory_budget, rule_ids, evidence,
                                 r.strict_time, r.min_mfu)
            result = judged()
            time_check = next((c for c in result.checks if c.name == "budget:step-time"), None)
            if (r.workload or r.entry) and not workers and time_check is not None and time_check.level == "error" \
                    and not time_check.passed:
                # slower than a recorded baseline: measure again before believing it
                progress("step time over budget against the recorded baseline: measuring again")
                evidence.remeasured_ms = remeasure(new_spec)
                evidence.load = max(os.getloadavg()[0] - 1, 0.0) / (os.cpu_count() or 1)
                result = judged()
    finally:
        for w in workers:
            w.close()
    result.path = str(path)
    result.base_document = base_document
    return result


def _one_document(path, r: Request) -> dict:
    """The result document of the one run at `path`; a partial analysis refused unless allowed."""
    from .engine import analyze_path

    documents = analyze_path(path, dataclasses.replace(r.job, documents=True))
    if len(documents) != 1:
        raise AdvisorError(f"{path}: holds {len(documents)} runs; check takes one run (give its run folder)")
    (document,) = documents
    run_doc = document["run"]
    if run_doc["warnings"] and not r.allow_partial:
        said = "; ".join(w.removeprefix(f"{run_doc['path']}: ") for w in run_doc["warnings"])
        raise AdvisorError(f"cannot judge: the analysis of {run_doc['path']} is partial ({said}); pass "
                           "--allow-partial to judge what could be read")
    return document
