"""`advisor tune WORKLOAD`: the settings the findings name, searched together, timed, the best that fits.

One rule proposes one change; the best configuration is often a combination no single rule
proposes (the tutorial's H100 table: layers unrolled without remat, x0.74 of the seed's step,
while "scan without remat" alone is slower). tune:

1. profiles the workload once and reads the settings its findings name: each recommendation's
   config change, the alternatives a rule offers, a change a check refuted; each key gets its
   current value, the values proposed, and its neutral value (both values of a switch, `none` for
   remat, one minibatch), so that a combination like "unrolled, no remat" is in the grid;
   `--vary KEY=V1,V2` (repeatable) searches those axes instead, without profiling first;
2. compiles every combination (nothing runs) and reads its peak from XLA's buffer assignment
   against the device's capacity (`--device-memory`, else the device's own limit, else the host's
   available memory on CPU): a row that does not fit is never run;
3. times the rows that fit against the workload as given with the paired engine of
   advisor/timing.py (interleaved rounds by worker processes used in turns, the median paired
   ratio and its noise bound), one row after another until `--budget` seconds are spent; the rows
   left are reported as not timed;
4. names the best row that fits: the lowest measured step time, and its `--set` flags.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Callable, Optional

from advisor.workloads.config import as_items

from .errors import AdvisorError
from .sweep import grid, label
from .units import mib

DEFAULT_BUDGET_S = 180.0
MAX_ROWS = 64           # combinations compiled at most: narrow the grid with --vary beyond this


def named_settings(findings: list, config: dict) -> dict[str, list]:
    """{key: [values]} the findings name: current value first, then the values proposed, then the
    key's neutral value (the other value of a switch, no remat, one minibatch)."""
    axes: dict[str, list] = {}
    for f in findings:
        rec = f.recommendation
        changes = [rec.config, (rec.refuted or {}).get("config") or {}, *(a["config"] for a in rec.alternatives)]
        for change in changes:
            for key, value in change.items():
                section, field = key.split(".", 1)
                current = config.get(section, {}).get(field)
                values = axes.setdefault(key, [_norm(current)])
                for v in (value, _neutral(key, current)):
                    if v is not None and _norm(v) not in values:
                        values.append(_norm(v))
    return axes


def _norm(value):
    return list(value) if isinstance(value, (list, tuple)) else value


def _neutral(key: str, current):
    if isinstance(current, bool):
        return not current
    if key.endswith(".remat"):
        return []
    if key.endswith("num_minibatches"):
        return 1
    return None


def vary_items(axes: dict[str, list]) -> list[str]:
    """The axes as `--vary KEY=V1,V2` items (the sweep's grammar)."""
    return [f"{key}=" + ",".join(as_items({key: v})[0].split("=", 1)[1] for v in values)
            for key, values in axes.items()]


def tune(name: str, preset: str, base: list[str], vary: list[str], logdir: Path, budget_s: float,
         capacity: Optional[int], progress: Callable[[str], None] = lambda m: None) -> dict:
    """The tune document: {"workload", "preset", "capacity_bytes", "capacity_source", "axes", "rows", "best",
    "not_timed"}."""
    from advisor import workloads

    from .workload_memory import device_capacity, estimate_bytes

    config = workloads.resolve(name, preset, base)
    cap, source = device_capacity(capacity)
    if capacity:
        source = "--device-memory"
    items = list(vary) or vary_items(named_settings(_findings(name, preset, config, logdir, capacity, progress),
                                                    config))
    if not items:
        raise AdvisorError(f"the findings on {name} ({preset}) name no setting to tune; give one with --vary KEY=V1,V2")
    rows = grid(name, preset, base, items)
    if len(rows) > MAX_ROWS:
        raise AdvisorError(f"{len(rows)} combinations to compile (at most {MAX_ROWS}): "
                           f"narrow the grid with --vary ({' '.join(items)})")
    progress(f"tune: {len(rows)} combinations of {', '.join(i.split('=', 1)[0] for i in items)}; "
             f"compiling each (pre-flight, nothing runs) against {mib(cap)} ({source})")
    out = []
    reference = None
    as_given = config
    for row in rows:
        row_config = workloads.resolve(name, preset, row)
        changed = [i for i in row if i not in base and workloads.resolve(name, preset, base + [i]) != as_given]
        entry = {"config": label(row, base), "set": changed,
                 "step_time_ms": None, "ratio": None, "noise": None, "peak_memory_bytes": None, "fits": False}
        try:
            entry["peak_memory_bytes"] = estimate_bytes(name, row_config)
        except Exception as err:  # noqa: BLE001 - a combination that does not compile is a row that says so
            entry["error"] = f"does not compile: {str(err).splitlines()[0] if str(err) else type(err).__name__}"
        need = entry["peak_memory_bytes"]
        entry["fits"] = need is not None and need <= cap
        if row_config == as_given:
            entry["reference"] = True
            reference = entry
        out.append(entry)
    fitting = [r for r in out if r["fits"]]
    if reference is None or not reference["fits"]:
        if reference is not None:
            del reference["reference"]
        reference = min(fitting, key=lambda r: r["peak_memory_bytes"]) if fitting else None
        if reference is not None:
            reference["reference"] = True
    timed, not_timed = _time_rows(name, preset, base, reference, fitting, budget_s, progress)
    best = min(timed, key=lambda r: r["ratio"]) if timed else None
    return {"workload": name, "preset": preset, "capacity_bytes": cap, "capacity_source": source,
            "budget_s": budget_s, "axes": items, "rows": out, "best": best,
            "not_timed": [r["config"] for r in not_timed]}


def _findings(name, preset, config, logdir, capacity, progress) -> list:
    """The findings on the workload as given (profiled once); where it does not fit, the memory
    remedies pre-flight would estimate."""
    from .engine import analyze_path
    from .findings import Expected, Finding, Recommendation
    from .job import Job
    from .memory_plan import candidates
    from .runner import profile_workload
    from .settings import Settings
    from .workload_memory import OutOfMemory

    progress("profiling the workload as given, for the settings its findings name")
    try:
        run_dir = profile_workload(name, preset, config, logdir, progress, capacity)
    except OutOfMemory:
        return [Finding("out-of-memory", "error", "", {}, Recommendation(
            "", Expected("peak_memory", None, "bytes", ""), "", config=c), 1.0) for c in candidates(name, config)]
    (analysis,) = analyze_path(run_dir, Job(settings=Settings(device_memory=capacity)))
    return analysis.findings


def _time_rows(name, preset, base, reference, fitting, budget_s, progress) -> tuple[list, list]:
    """Each fitting row timed against the reference row until the budget is spent."""
    from .timing import Reference

    if reference is None:
        return [], []
    spec = lambda row: {"workload": name, "preset": preset, "overrides": base + row["set"]}  # noqa: E731
    others = [r for r in fitting if r is not reference]
    if not others:      # nothing to compare it with: the one row that fits is the answer, untimed
        reference.update(ratio=1.0, verdict="reference")
        return [reference], []
    deadline = time.monotonic() + budget_s
    timed, left = [], []
    base_ms: list[float] = []
    progress(f"timing {len(others)} combination(s) against {reference['config']} within {budget_s:.0f} s: "
             "interleaved paired rounds")
    with Reference(spec(reference)) as ref:
        for row in others:
            if time.monotonic() > deadline:
                left.append(row)
                row["not_timed"] = "the --budget was spent"
                continue
            try:
                m = ref.time(spec(row), row["config"], progress, deadline=deadline)
            except AdvisorError as err:
                row["error"] = str(err)
                continue
            row.update(ratio=round(m.ratio, 4), noise=round(m.noise, 4), band=[round(m.low, 4), round(m.high, 4)],
                       verdict=m.verdict, rounds=m.rounds, measured_ms=round(m.new_ms, 3))
            base_ms.append(m.base_ms)
            timed.append(row)
    ref_ms = statistics.median(base_ms) if base_ms else None
    reference.update(ratio=1.0, noise=0.0 if base_ms else None, verdict="reference")
    for row in [reference, *timed]:      # one scale: the reference's median, times each row's ratio
        row["step_time_ms"] = round(ref_ms * row["ratio"], 3) if ref_ms else None
    return ([reference, *timed] if ref_ms else []), left
