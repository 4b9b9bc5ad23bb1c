"""The run's summary (`runs[].summary`, `views.summary.of(profile)`): step time, op time, peak memory,
devices and collectives, and the views the report shows beside them (parallelism, efficiency).
"""
from __future__ import annotations

import dataclasses
from typing import Any

from ..model import Profile
from ..version import __version__
from . import activity, efficiency, idle, kernels, memory, parallelism, recording, step_time
from .bound import cached, device_capacity


def _us(ns) -> Any:
    return round(ns / 1e3, 3) if ns is not None else None


def _device_summary(d, steps, small) -> dict[str, Any]:
    out = {
        "name": d.name,
        "description": d.description,
        "kernels": d.kernel_count,
        "kernel_time_ms": round(d.kernel_ns / 1e6, 3),
        **small.to_json(),
        "memcpys": d.memcpy_count,
        "memcpy_time_ms": round(d.memcpy_ns / 1e6, 3),
        "time_by_category_ms": {k: round(v / 1e6, 3) for k, v in sorted(d.time_by_category.items(),
                                                                          key=lambda kv: -kv[1])},
        "memory_bytes": d.memory_bytes,
        "launches_matched": d.launches_matched,
        "command_buffer_launches": d.graph_launches,
        "command_buffer_kernels": d.graph_kernels,
        "command_buffer_unattributed": d.graph_unattributed,
        "launches_queued": d.launches_queued,
        "launch_queue_median_us": _us(d.launch_queue_median_ns),
        "launch_overhead_median_us": _us(d.launch_overhead_median_ns),
        "launch_call_median_us": _us(d.launch_call_median_ns),
    }
    if steps:
        busy, idle_ns = idle.busy_and_idle(d.busy, steps)
        out["busy_in_steps_ms"] = round(busy / 1e6, 3)
        out["idle_in_steps_ms"] = round(idle_ns / 1e6, 3)
    return out


def device_entries(profile: Profile) -> list[dict[str, Any]]:
    """summary.devices: one entry per device of every host, its per-step figures, and on GPU/TPU
    the plane's own facts (kernels, copies, categories) for the devices that were active."""
    view = activity.of(profile)
    activity_of = {(d.host, d.name): entry for d, entry in zip(view.devices, view.to_json())}
    first = profile.hosts[0].name if profile.hosts else ""
    if not profile.devices:
        return list(activity_of.values())
    small = kernels.of(profile)
    out = []
    for d in profile.devices:
        if d.active:
            out.append({**_device_summary(d, profile.steps, small.of_device(d.name)),
                        **activity_of.pop((first, d.name), {"host": first})})
    return out + list(activity_of.values())


def collective_entries(profile: Profile) -> list[dict[str, Any]]:
    """summary.collectives: each collective instruction of the step program that ran, per step on one
    device (the mean over devices): executions, bytes each device moves (HLO operand shapes and replica
    groups, ring), time, transfer and wait apart, and the algorithmic bandwidth of the transfer."""
    devices = activity.of(profile).devices
    module = profile.modules.get(profile.step_module or "")
    if module is None or not devices:
        return []
    steps = max(1, len(profile.steps))
    first = profile.hosts[0].devices if profile.hosts else devices
    counts = {o.name: o.count / steps / max(1, len(first)) for o in profile.ops if o.module == profile.step_module}
    out = []
    for op in sorted({op for d in devices for op in d.collectives}):
        ins = module.instructions.get(op)
        if ins is None:
            continue
        having = [d for d in devices if op in d.collectives]
        time_ns = sum(d.collectives[op] for d in having) / len(having)
        wait_ns = sum(d.collective_wait.get(op, 0.0) for d in having) / len(having)
        per_step = counts.get(op, 1.0)
        moved = ins.bytes_moved(len(devices)) * per_step
        transfer = time_ns - wait_ns
        out.append({"instruction": op, "opcode": ins.opcode, "per_step": round(per_step, 3),
                    "bytes_per_device": int(moved), "time_ms": round(time_ns / 1e6, 3),
                    "transfer_ms": round(transfer / 1e6, 3), "wait_ms": round(wait_ns / 1e6, 3),
                    "algorithmic_gb_per_s": float(f"{moved / transfer:.4g}") if transfer > 0 else None})
    return sorted(out, key=lambda c: -c["time_ms"])


def _steps_from(steps) -> str:
    if steps[0].device_timed:
        return "the device work each step annotation launched (the annotations end before it: the steps do not block)"
    return "step annotations" if steps[0].annotated else "executions of the step program"


@dataclasses.dataclass(frozen=True)
class Summary:
    figures: dict[str, Any]         # runs[].summary
    notes: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return self.figures


def of(profile: Profile) -> Summary:
    return cached(profile, "summary", lambda p: Summary(_build(p)))


def _build(profile: Profile) -> dict[str, Any]:
    from ..sources import shown

    steps = profile.steps
    meta = profile.run_metadata
    times = step_time.of(profile)
    step_ns = times.median_ns
    durations = sorted(times.durations_ns)
    out: dict[str, Any] = {
        "steps": len(steps),
        "steps_from": _steps_from(steps) if steps else None,
        "step_time_ms": round(step_ns / 1e6, 3) if step_ns is not None else None,
        "step_time_spread_ms": round((durations[-1] - durations[0]) / 1e6, 3) if len(durations) > 1 else None,
        "step_module": profile.step_module,
        # one device's share: the first host's op time over its devices that ran, never a sum over devices
        "op_time_per_step_ms": round(times.step_program_op_ns / max(len(steps), 1)
                                     / max(1, len(profile.hosts[0].devices) if profile.hosts else 1) / 1e6, 3)
        if profile.step_module else None,
        "peak_memory_bytes": memory.of(profile).peak_bytes,
        "peak_memory_source": memory.of(profile).source,
        "device_capacity_bytes": device_capacity(profile),
        "modules": len(profile.modules),
        "advisor_version": __version__,
    }
    if profile.devices or profile.device_totals:
        out["devices"] = device_entries(profile)
        view = activity.of(profile)
        slowest = view.slowest if len(view.devices) > 1 else None
        out["slowest_device"] = {"name": slowest.name, "host": slowest.host} if slowest else None
        out["collectives"] = collective_entries(profile)
    if profile.devices:
        out["devices_idle"] = [d.name for d in profile.devices if not d.active]
    if profile.allocators:
        out["allocators"] = [{"allocator": a.allocator, "peak_bytes": a.peak_bytes,
                              "lifetime_peak_bytes": a.lifetime_peak_bytes, "events": a.events}
                             for a in profile.allocators]
    if profile.device_memory_profile:
        ours = bool(isinstance(meta, dict) and meta.get("workload"))    # advisor's own file by its package path
        out["device_memory_profile"] = [
            {"kind": e.kind, "device": e.device, "bytes": e.bytes, "count": e.count,
             "largest_sites": [{"site": shown(site, ours), "bytes": b} for site, b in e.sites]}
            for e in profile.device_memory_profile]
    view = parallelism.of(profile)
    if view is not None:
        out["parallelism"] = view.to_json()
    if meta:
        out["run"] = {k: meta.get(k) for k in ("workload", "preset", "entry", "backend", "device_kind", "num_params",
                                               "compile_s", "compile_cache", "step_wall_ms_median", "step_wall_ms")
                      if meta.get(k) is not None}
        if meta.get("workload"):       # what this run set beyond its preset: how its label names it
            from ..run_label import settings
            out["run"]["settings"] = settings(meta)
    out["recorded_with"] = recording.of(profile).to_json()
    out["efficiency"] = efficiency.of(profile).to_json()
    return out
