"""Advice checked by compiling it (`checked: compiled`): for a trace a bundled workload recorded, the
workload is compiled with each recommended config change applied and the variant's memory read from
XLA's buffer assignment (what pre-flight computes; nothing runs). A change that promised less peak
memory and does not deliver it in the compiled step is not printed as a fix: the finding keeps its
evidence, the recommendation says what was tried and what the compiler measured. Step-time claims
stay estimates (advisor/verification.py re-runs and measures them).

`run-workload` checks every run it records; `analyze --compile-check` a recorded trace, as a step
of the run's job (advisor/job.py), on this machine when its backend is the trace's.
"""

from __future__ import annotations

import json
from typing import Callable, Optional

from advisor.workloads.config import as_items

from .findings import Expected, Finding
from .units import mib

MEMORY_GAIN = 0.99      # a memory fix must bring the compiled or measured peak below this share of today's


def run_metadata(analysis) -> dict:
    return analysis.profile.run_metadata


def sets(change: dict) -> str:
    return " ".join(f"--set {o}" for o in as_items(change))


def refute(finding: Finding, checked: str, reason: str) -> None:
    """The change does not do what it promised: no fix is printed, the finding says what was tried."""
    rec = finding.recommendation
    tried = rec.config
    finding.severity = "info"
    rec.refuted = {"config": tried, "text": rec.text}
    what = rec.remedy.kind.value.replace("_", " ") + " " if rec.remedy is not None else ""
    rec.text = f"no change recommended: {what}({sets(tried)}) was checked and does not help here"
    rec.config = {}
    rec.expected = Expected(rec.expected.metric, None, rec.expected.unit, "none (see checked)")
    rec.cost = "none: no change recommended"
    rec.checked, rec.check = checked, reason


def compile_check(name: str, preset: str, overrides: list[str], analysis,
                  progress: Callable[[str], None] = lambda m: None, base: Optional[int] = None) -> dict:
    """Compile the workload with each recommended config change and record what it would need
    (`base`: what the step needs as it ran; default: the run's own compiled figure). Returns what was
    compiled (`recorded`), which run-workload keeps in the run's advisor_run.json: whoever analyzes
    the run later (analyze, serve, the TensorBoard tab) shows the same checked advice."""
    from advisor import workloads

    from .workload_memory import estimate_bytes

    base = base or run_metadata(analysis).get("required_bytes")
    variants = []
    for finding in analysis.findings:
        rec = finding.recommendation
        if not rec.config:
            continue
        config = dict(rec.config)
        progress(f"checking {finding.rule}: compiling with {sets(config)} (not running)")
        try:
            need = estimate_bytes(name, workloads.resolve(name, preset, overrides + as_items(config)))
        except Exception as exc:  # noqa: BLE001 - a change that does not compile is refuted, not fatal
            variants.append({"config": config, "error": str(exc).splitlines()[0]})
        else:
            variants.append({"config": config, "required_bytes": need})
        _judge(finding, base, variants[-1])
    return {"base_bytes": base, "variants": variants}


def apply_recorded(analysis) -> None:
    """The advice of a run that run-workload compile-checked, checked as it was then (advisor_run.json's
    `compile_checked`): the same figures, without compiling again. A stranger's file: only a variant
    whose config is a finding's, with an integer figure or an error text, is used."""
    recorded = run_metadata(analysis).get("compile_checked")
    if not isinstance(recorded, dict) or not isinstance(recorded.get("variants"), list):
        return
    base = recorded.get("base_bytes")
    base = base if isinstance(base, int) and not isinstance(base, bool) and base > 0 else None
    key = lambda config: json.dumps(config, sort_keys=True, default=str)  # noqa: E731 - tuples and lists alike
    variants = {key(v["config"]): v for v in recorded["variants"] if isinstance(v, dict) and "config" in v}
    for finding in analysis.findings:
        config = finding.recommendation.config
        if config and key(config) in variants:
            _judge(finding, base, variants[key(config)])


def _judge(finding: Finding, base: Optional[int], variant: dict) -> None:
    """What a compiled variant ({"config", "required_bytes"} or {"config", "error"}) says of the finding's fix."""
    rec = finding.recommendation
    change = sets(rec.config)
    need, error = variant.get("required_bytes"), variant.get("error")
    if isinstance(error, str):
        refute(finding, "compiled", f"with {change} the step does not compile: {error[:300]}")
        return
    if not isinstance(need, int) or isinstance(need, bool) or not base:
        rec.check = f"{rec.check} (compiled with {change}: the compiler gave no memory figures)"
        return
    figures = f"with {change}: peak {mib(base)} -> {mib(need)} (XLA buffer assignment)"
    if rec.expected.metric == "peak_memory":
        if need >= MEMORY_GAIN * base:
            refute(finding, "compiled", f"with {change} the step needs {mib(need)} against {mib(base)} today "
                                        "(XLA buffer assignment)")
            return
        was = rec.expected.saving
        rec.expected = Expected("peak_memory", base - need, "bytes",
                                f"{mib(base - need)} less peak memory (compiled: {mib(base)} -> {mib(need)})"
                                + (f"; the trace's estimate was {mib(was)}" if was else ""))
        rec.checked, rec.check = "compiled", figures
    else:
        capacity = finding.evidence.get("device_capacity_bytes")    # a fix that trades memory for time
        if capacity and need > capacity:
            refute(finding, "compiled", f"with {change} the step needs {mib(need)}, more than the device's "
                                        f"{mib(capacity)} (XLA buffer assignment)")
            return
        rec.check = f"step time from this trace (--verify re-runs and measures it); compiled {figures}"
        if need > base / MEMORY_GAIN:
            rec.cost = f"{rec.cost}; peak memory grows: {mib(base)} -> {mib(need)} (compiled)"


def overrides_of(name: str, preset: str, config: dict) -> list[str]:
    """The `--set` items that turn the preset into the recorded config (what a trace's run was given)."""
    from advisor import workloads

    base = workloads.resolve(name, preset, [])
    norm = lambda v: list(v) if isinstance(v, (list, tuple)) else v  # noqa: E731
    return [o for section, fields in config.items() for key, value in fields.items()
            if norm(base.get(section, {}).get(key)) != norm(value)
            for o in as_items({f"{section}.{key}": value})]


def compile_check_trace(analysis, progress: Callable[[str], None] = lambda m: None) -> None:
    """`analyze --compile-check`: a trace recorded by a bundled workload, its config changes compiled
    here, on this machine's backend when it is the trace's and has the devices the config needs."""
    import jax

    from advisor.workloads import parallel

    meta = run_metadata(analysis)
    name, preset, config = meta.get("workload"), meta.get("preset"), meta.get("config")
    if not name or not preset or not isinstance(config, dict):
        return
    why = None
    if jax.default_backend() != analysis.profile.backend:
        why = f"this machine's backend is {jax.default_backend()}, the trace's {analysis.profile.backend}"
    elif jax.device_count() < parallel.devices_needed(config):
        why = f"the config needs {parallel.devices_needed(config)} devices, this process has {jax.device_count()}"
    if why:
        for f in analysis.findings:
            if f.recommendation.config:
                f.recommendation.check += f" (not compiled: {why})"
        return
    from advisor import workloads

    from .workload_memory import estimate_bytes

    overrides = overrides_of(name, preset, config)
    if not any(f.recommendation.config for f in analysis.findings):
        return
    progress("compiling the step as it ran, on this machine (not running)")
    base = estimate_bytes(name, workloads.resolve(name, preset, overrides))   # like for like with the variants
    compile_check(name, preset, overrides, analysis, progress, base)
