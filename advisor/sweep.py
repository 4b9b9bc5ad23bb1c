"""`advisor sweep`: every combination of the varied config values, run and compared."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Callable, Optional

from .compare import metrics
from .engine import analyze_path
from .errors import AdvisorError
from .job import Job
from .runner import add_metadata, profile_workload
from .units import mib
from .workload_memory import OutOfMemory


def grid(name: str, preset: str, base: list[str], vary: list[str]) -> list[list[str]]:
    """Override lists, one per row, each value as the user wrote it (the row's label); every value is
    read in the one grammar of `--set` (`none`, `MLP+Attn`) and validated before anything runs."""
    from advisor import workloads

    axes = []
    for item in vary:
        if "=" not in item:
            raise AdvisorError(f"--vary expects KEY=V1,V2,..., got {item!r}")
        key, values = item.split("=", 1)
        vals = [v.strip() for v in values.split(",")]
        if any(v == "" for v in vals):
            raise AdvisorError(f"--vary {key.strip()}: empty value in {values!r} (write 'none' for an empty set)")
        axes.append([f"{key.strip()}={v}" for v in vals])
    rows = [base + list(combo) for combo in itertools.product(*axes)]
    for row in rows:
        workloads.resolve(name, preset, row)
    return rows


def label(items: list[str], base: list[str]) -> str:
    """A row's name: its varied values as written (`model.remat=none`), `(base)` when none vary."""
    return " ".join(i for i in items if i not in base) or "(base)"


def run_grid(name: str, preset: str, base: list[str], rows: list[list[str]], logdir: Path,
             progress: Callable[[str], None], memory_limit: Optional[int] = None) -> list[dict]:
    from advisor import workloads

    out = []
    first = None
    varied = list(dict.fromkeys(i.split("=", 1)[0] for items in rows for i in items if i not in base))
    progress(f"sweep: {len(rows)} row{'s' if len(rows) != 1 else ''}: " + " | ".join(label(r, base) for r in rows))
    for items in rows:
        row_name = label(items, base)
        progress(f"sweep: {row_name}")
        config = workloads.resolve(name, preset, items)
        try:
            run_dir = profile_workload(name, preset, config, logdir, progress, memory_limit)
            add_metadata(run_dir, sweep={"varied": varied})     # its label names them, the default row's too
        except OutOfMemory as err:
            out.append({"config": row_name,
                        "error": f"out of memory: needs {mib(err.required)} of {mib(err.capacity)}"})
            continue
        (document,) = analyze_path(run_dir, Job(documents=True))
        m = metrics(document)
        row = {"config": row_name, "trace": str(run_dir), "step_time_ms": m.step_time_ms,
               "step_time_spread": round(m.spread, 4), "peak_memory_bytes": m.peak_memory_bytes,
               "findings": sorted(m.findings)}
        if first is None:
            first = row
        row["peak_memory_ratio"] = (round(row["peak_memory_bytes"] / first["peak_memory_bytes"], 4)
                                    if first["peak_memory_bytes"] and row["peak_memory_bytes"] else None)
        row["overrides"] = items
        out.append(row)
    _time_rows(name, preset, [r for r in out if "error" not in r], progress)
    for row in out:
        row.pop("overrides", None)
    return out


def _time_rows(name: str, preset: str, rows: list[dict], progress: Callable[[str], None]) -> None:
    """Step time ratios to the first row from the paired engine (advisor/timing.py): each row timed
    against the first in interleaved rounds, the median paired ratio and its noise bound."""
    from .timing import Reference

    if not rows:
        return
    spec = lambda row: {"workload": name, "preset": preset, "overrides": row["overrides"]}  # noqa: E731
    rows[0].update(step_time_ratio=1.0, step_time_noise=None)
    if len(rows) == 1:
        return
    progress(f"sweep: timing {len(rows) - 1} row(s) against {rows[0]['config']}: interleaved paired rounds")
    try:
        with Reference(spec(rows[0])) as ref:
            for row in rows[1:]:
                try:
                    m = ref.time(spec(row), row["config"], progress)
                except AdvisorError as err:
                    row.update(step_time_ratio=None, step_time_noise=None, timing_error=str(err))
                    continue
                row.update(step_time_ratio=round(m.ratio, 4), step_time_noise=round(m.noise, 4),
                           step_time_paired=m.to_json())
    except AdvisorError as err:
        for row in rows[1:]:
            row.update(step_time_ratio=None, step_time_noise=None, timing_error=str(err))
