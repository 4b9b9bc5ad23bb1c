"""Out of memory, before or while running: which config changes bring the step under capacity.

Each candidate change comes from the rules' own recommendations (bfloat16, remat, more
minibatches, donation, a smaller batch) and is estimated by compiling the step with it,
without running it.
"""

from __future__ import annotations

from typing import Callable, Optional

from advisor.workloads.config import as_items

from .findings import Expected, Finding, Recommendation
from .remedies import Kind, Remedy
from .units import mib
from .workload_memory import OutOfMemory, estimate_bytes


def candidates(name: str, config: dict) -> list[dict]:
    """Config changes worth estimating, each alone, from the current config: the workload's
    mapping of the memory remedies (bfloat16, remat, donation, more minibatches, a smaller batch)."""
    from advisor import workloads

    remedies = [Remedy(Kind.BFLOAT16), Remedy(Kind.REMAT, "blocks"), Remedy(Kind.DONATE, "state"),
                Remedy(Kind.MORE_MINIBATCHES, value=2), Remedy(Kind.MORE_MINIBATCHES, value=4),
                Remedy(Kind.SMALLER_BATCH)]
    out = []
    for remedy in remedies:
        change = workloads.remedy_config(name, remedy, config)
        if change and change not in out:
            out.append(change)
    return out


def out_of_memory_finding(name: str, preset: str, overrides: list[str], err: OutOfMemory,
                          progress: Callable[[str], None] = lambda m: None) -> Finding:
    from advisor import workloads

    config = workloads.resolve(name, preset, overrides)
    rows = []
    for change in candidates(name, config):
        progress(f"estimating {' '.join(as_items(change))} (compiling, not running)")
        try:
            estimate: Optional[int] = estimate_bytes(name,
                                                     workloads.resolve(name, preset, overrides + as_items(change)))
        except Exception as exc:  # noqa: BLE001 - a candidate that does not compile is reported, not fatal
            rows.append({"change": change, "estimated_bytes": None, "fits": False, "error": str(exc).splitlines()[0]})
            continue
        rows.append({"change": change, "estimated_bytes": estimate,
                     "fits": estimate is not None and estimate <= err.capacity})
    fitting = sorted((r for r in rows if r["fits"]), key=lambda r: r["estimated_bytes"])
    need = f"{mib(err.required)}" if err.required else "more than is available"
    when = "ran out of memory while running" if err.at_run_time else "does not fit"
    best = fitting[0] if fitting else None
    text = ("apply one of the changes that fit: " + "; ".join(
        f"{' '.join('--set ' + o for o in as_items(r['change']))} (~{mib(r['estimated_bytes'])})" for r in fitting)
        if fitting else "no single change fits: combine them (e.g. bfloat16 with remat) "
                        "or use a device with more memory")
    return Finding(
        rule="out-of-memory",
        severity="error",
        title=f"the step {when}: it needs {need}, the device has {mib(err.capacity)} ({err.source})",
        evidence={
            "required_bytes": err.required,
            "capacity_bytes": err.capacity,
            "capacity_source": err.source,
            "at_run_time": err.at_run_time,
            "detail": err.detail,
            "candidates": rows,
        },
        recommendation=Recommendation(
            text=text,
            config=best["change"] if best else {},
            expected=Expected("peak_memory",
                              (err.required - best["estimated_bytes"]) if best and err.required else None, "bytes",
                              f"the step fits: about {mib(best['estimated_bytes'])} of {mib(err.capacity)}"
                              if best else "no estimate fits"),
            cost="see each rule's trade-off: bfloat16 changes numerics, remat recomputes, "
                 "more minibatches are slower, a smaller batch changes the optimization",
            checked="compiled",
            check=f"each of the {len(rows)} candidate changes compiled alone, not run (XLA buffer assignment)",
        ),
        impact=1.0,
    )


def out_of_memory_document(name: str, preset: str, overrides: list[str], err: OutOfMemory,
                           progress: Callable[[str], None] = lambda m: None) -> dict:
    """The result document of a run that did not fit (nothing was traced): its one finding says which
    config changes fit, each estimated by compiling it."""
    import jax

    finding = out_of_memory_finding(name, preset, overrides, err, progress)
    device = jax.devices()[0]
    run = {"path": None, "backend": device.platform, "device": device.device_kind,
           "summary": {"steps": 0, "step_time_ms": None, "step_time_spread_ms": None, "step_module": None,
                       "op_time_per_step_ms": None, "peak_memory_bytes": err.required,
                       "peak_memory_source": "compiled memory analysis (not run)",
                       "device_capacity_bytes": err.capacity, "modules": 0,
                       "run": {"workload": name, "preset": preset}},
           "findings": [finding.to_json()], "notes": [f"not run: {finding.title}"], "warnings": []}
    return {"run": run, "views": {}}
