"""Verified advice: apply each recommended config change alone, re-run, measure the gain.

A recommendation is verified only when the metric it promised to improve did improve beyond
what the runs themselves show as noise (step time: the spread of the profiled steps; peak
memory: XLA's buffer assignment, which is exact). Changes that should not alter the model's
function (unrolling a scan, remat, donation, accumulation) must give the same loss on the
same initial parameters; a mismatch is reported as a bug.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Optional

from .compare import compare, metrics
from .engine import Analysis, analyze_path
from .memory_plan import as_overrides
from .remedies import CHANGES_NUMERICS
from .runner import OutOfMemory, RUN_METADATA, profile_workload

LOSS_RTOL = 1e-4


def _meta(analysis: Analysis) -> dict:
    return analysis.profile.run_metadata


def verify(name: str, preset: str, overrides: list[str], before: Analysis, logdir: Path,
           progress: Callable[[str], None] = lambda m: None, memory_limit: Optional[int] = None) -> list[dict]:
    """Re-run with each finding's config change; attach the measurement to the finding."""
    from advisor import workloads

    results = []
    base_metrics = metrics(before)
    for finding in before.findings:
        change = finding.recommendation.config
        if not change:
            continue
        items = overrides + as_overrides(change)
        progress(f"verifying {finding.rule}: re-running with {' '.join(as_overrides(change))}")
        config = workloads.resolve(name, preset, items)
        try:
            run_dir = profile_workload(name, preset, config, logdir, progress, memory_limit)
        except OutOfMemory as err:
            finding.verified = {"change": change, "improved": False,
                                "error": f"out of memory: needs {err.required} bytes of {err.capacity}"}
            results.append(finding.verified)
            continue
        (after,) = analyze_path(run_dir)
        c = compare(base_metrics, metrics(after))
        promised = finding.recommendation.expected.metric
        if promised == "peak_memory":
            improved = c.peak_memory_ratio is not None and c.peak_memory_ratio < 0.99
        else:
            improved = c.step_time_improved()
        loss_before, loss_after = _meta(before).get("initial_loss"), _meta(after).get("initial_loss")
        remedy = finding.recommendation.remedy
        changes = remedy is None or remedy.kind in CHANGES_NUMERICS   # untyped: do not promise the same loss
        numerics = "changes numerics (dtype)" if changes else "same function"
        loss_match = None
        if loss_before is not None and loss_after is not None:
            loss_match = abs(loss_after - loss_before) <= LOSS_RTOL * max(abs(loss_before), 1.0)
        finding.verified = {
            "change": change,
            "promised": promised,
            "improved": bool(improved),
            "step_time_ms": [c.base.step_time_ms, c.new.step_time_ms],
            "step_time_ratio": round(c.step_time_ratio, 4) if c.step_time_ratio else None,
            "step_time_noise": round(c.noise, 4),
            "peak_memory_bytes": [c.base.peak_memory_bytes, c.new.peak_memory_bytes],
            "peak_memory_ratio": round(c.peak_memory_ratio, 4) if c.peak_memory_ratio else None,
            "compiled_required_bytes": [_meta(before).get("required_bytes"), _meta(after).get("required_bytes")],
            "numerics": numerics,
            "initial_loss": [loss_before, loss_after],
            "loss_match": loss_match,
            "bug": numerics == "same function" and loss_match is False,
            "findings_after": sorted(c.new.findings),
            "trace": str(run_dir / RUN_METADATA),
        }
        results.append(finding.verified)
    return results
