"""How far the step is from the hardware (`runs[].summary.efficiency`, `views.efficiency.of(profile)`):
the FLOPs and bytes of the step's ops (the ops view), the rates they reach over their measured time,
MFU and HFU against the device's peaks (the peak view), a roofline bound per op, and the step's
verdict (compute, memory, latency, host or communication), with what it rests on (basis.py).

Conventions:
- Op time, categories and op rows are one device's (the mean over the devices that ran the
  program); `flops_per_step` and `bytes_per_step` are the whole step's, over every device.
- MFU = model matmul FLOPs per step / (step time x devices x peak matmul FLOP/s for the matmul
  dtype); HFU counts the matmul FLOPs that were executed, the recomputation remat adds included
  (ops JAX names `rematted_computation`).
- An op whose execution takes under LATENCY_NS is latency-bound (too short to reach either roof);
  else compute-bound when its arithmetic intensity (FLOPs per byte) reaches the ridge point (peak
  FLOP/s over peak bytes/s), memory-bound below it. Collectives are communication, judged by the
  time they leave exposed (no compute beside them), never by a roofline.
- A rate above 100% of a peak is never given as an efficiency: the share is null and a note says
  that the peak (or the count) cannot be right.
"""
from __future__ import annotations

import collections
import dataclasses
from typing import Any, Optional

from ..model import Profile
from ..peak_table import Peak
from ..units import si, sig
from . import activity, idle, step_time
from . import ops as ops_view
from . import peak as peak_view
from .basis import verdict_basis, with_basis
from .bound import cached
from .ops import LATENCY_NS, OpRow, bandwidth_roof, op_bound, roof_share, served_from_l2

TOP_OPS = 60                  # op rows kept in the JSON (by time) for the roofline chart


def _mean_roof(rows: list[OpRow], peak: Optional[Peak]) -> Optional[float]:
    """The bandwidth roof of a group of ops, weighted by their time: their bytes over it is the share of
    what each could move at its own roof in the time it took (the peak's bandwidth with one roof)."""
    if peak is None or not peak.bytes_per_s:
        return None
    t = sum(r.time_ns for r in rows)
    return sum(r.time_ns * bandwidth_roof(r, peak) for r in rows) / t if t > 0 else peak.bytes_per_s


def _share(value: Optional[float], peak: Optional[float]) -> Optional[float]:
    if value is None or not peak:
        return None
    return value / peak


def _round(x: Optional[float], digits: int = 4) -> Optional[float]:
    return None if x is None else float(f"{x:.{digits}g}")


@dataclasses.dataclass(frozen=True)
class Efficiency:
    figures: Optional[dict[str, Any]]       # summary.efficiency; None when the step program's HLO is not in the trace
    notes: tuple[str, ...] = ()

    def to_json(self) -> Optional[dict[str, Any]]:
        return self.figures


def of(profile: Profile) -> Efficiency:
    """The efficiency section: `to_json()` is summary.efficiency (None without the step program's HLO)."""
    return cached(profile, "efficiency", lambda p: Efficiency(_build(p)))


def _build(profile: Profile) -> Optional[dict[str, Any]]:
    ops = ops_view.of(profile)
    if ops is None:
        return None
    rows, steps, devices = ops.rows, ops.steps, ops.devices
    notes: list[str] = []
    peaks = peak_view.of(profile)
    dtype = peaks.step_dtype
    peak, why = peaks.step
    if why:
        notes.append(why)
    bounds = {id(r): op_bound(r, peak) for r in rows}

    over_peak: list[str] = []

    def checked(rate: Optional[float], roof: Optional[float], what: str) -> Optional[float]:
        share = _share(rate, roof)
        if share is not None and share > 1.0:
            over_peak.append(f"{what} at {share:.0%}")
            return None
        return share

    total_ns = sum(r.time_ns for r in rows)
    unknown_ns = sum(r.time_ns for r in rows if r.flops is None)
    flops = sum(r.flops for r in rows if r.flops is not None)
    nbytes = sum(r.bytes for r in rows)
    mm_flops = sum(r.flops for r in rows if r.matmul and r.flops is not None)
    model_mm = sum(r.flops for r in rows if r.matmul and r.flops is not None and not r.remat)
    step_ns = step_time.of(profile).median_ns
    peak_flops = peak.flops_per_s if peak else None
    peak_bw = peak.bytes_per_s if peak else None

    l2 = {id(r) for r in rows if served_from_l2(r, peak)}
    for r in rows:
        if r.time_ns <= 0:
            continue
        if r.flops:
            checked(r.flops / (r.time_ns / 1e9), peak_flops, f"op {r.name}: {_rate(r.flops / (r.time_ns / 1e9))}")
        if r.bytes and id(r) not in l2:
            checked(r.bytes / (r.time_ns / 1e9), bandwidth_roof(r, peak) if peak_bw else None,
                    f"op {r.name}: {_bw(r.bytes / (r.time_ns / 1e9))}")
    if l2:
        l2_ns = sum(r.time_ns for r in rows if id(r) in l2)
        notes.append(f"{len(l2)} op(s) ({l2_ns / total_ns:.1%} of op time) move their bytes faster than the HBM "
                     f"peak allows while one execution's traffic fits in the {peak.l2_bytes / 1e6:.0f} MB L2 "
                     f"({peak.l2_source}): served from L2, so their bytes are not charged to HBM bandwidth")

    categories = []
    by_cat: dict[str, list[OpRow]] = collections.defaultdict(list)
    for r in rows:
        by_cat[r.category].append(r)
    for cat, members in sorted(by_cat.items(), key=lambda kv: -sum(r.time_ns for r in kv[1])):
        t = sum(r.time_ns for r in members) / 1e9
        known = [r.flops for r in members if r.flops is not None]
        f = sum(known) if known else None
        b = sum(r.bytes for r in members)
        fr = f / t if f is not None and t > 0 else None
        br = b / t if t > 0 else None
        hbm = [r for r in members if id(r) not in l2]      # what reaches HBM: ops served from L2 aside
        hbm_t = sum(r.time_ns for r in hbm) / 1e9
        hbm_r = sum(r.bytes for r in hbm) / hbm_t if hbm_t > 0 else None
        by_bound: dict[str, float] = collections.defaultdict(float)
        for r in members:
            if bounds[id(r)]:
                by_bound[bounds[id(r)]] += r.time_ns
        categories.append({
            "category": cat, "time_s": _round(t, 6), "flops": f, "bytes": b,
            "time_per_step_s": _round(t / max(steps, 1), 6),
            "flops_per_step": f / max(steps, 1) if f is not None else None, "bytes_per_step": b / max(steps, 1),
            "flops_per_s": _round(fr), "bytes_per_s": _round(br),
            "flops_share_of_peak": _round(checked(fr, peak_flops, f"{cat} ops: {_rate(fr)}")),
            "bytes_share_of_peak": _round(checked(hbm_r, _mean_roof(hbm, peak), f"{cat} ops: {_bw(hbm_r)}")),
            "l2_time_s": _round(sum(r.time_ns for r in members if id(r) in l2) / 1e9, 6),
            "bound": max(by_bound, key=by_bound.get) if by_bound else None})

    # per step: over the profiled steps; a trace without steps: over its traced window, as one "step"
    per = max(steps, 1)
    if steps:
        step_s = step_ns / 1e9 if step_ns else None
    else:
        window = [d.step_ns for d in activity.of(profile).devices if d.step_ns]
        step_s = sum(window) / len(window) / 1e9 if window else None
        if step_s:
            notes.append(f"the trace has no steps: per-step figures, MFU and HFU are over its traced window "
                         f"({sig(step_s * 1e3)} ms)")
    achieved_f = flops / per / step_s if step_s else None
    achieved_b = nbytes / per / step_s if step_s else None
    mfu = checked(model_mm / per / step_s, peak_flops, "MFU") if step_s and mm_flops else None
    hfu = checked(mm_flops / per / step_s, peak_flops, "HFU") if step_s and mm_flops else None
    if not step_s:
        notes.append("no step time: MFU and the rates per step are unknown")
    if over_peak:
        src = peak.source if peak else "?"
        why = ("so the peak cannot be right for this device (or the count is wrong)" if profile.backend != "cpu" else
               "so the peak cannot be right for this device, or the op's time is short (XLA:CPU hands large ops "
               "to its thread pool, and an op's event may end before that work does)")
        notes.append(f"above 100% of the peak ({src}), {why}; those shares are left out: {'; '.join(over_peak[:5])}"
                     + (f" and {len(over_peak) - 5} more" if len(over_peak) > 5 else ""))
    unknown_share = unknown_ns / total_ns if total_ns else 0.0
    if unknown_ns and total_ns:
        unknown = sorted({r.instruction.label for r in rows if r.flops is None})
        notes.append(f"{unknown_share:.1%} of op time is in ops whose FLOPs the HLO does not say "
                     f"({', '.join(unknown[:4])}): not counted")

    bound, verdict = _verdict(profile, rows, bounds, peak, mfu, per, step_s, unknown_share, l2, window=not steps)
    basis = verdict_basis(profile, rows, bounds, peak, per, step_s, bound)
    verdict = with_basis(verdict, basis, steps)
    return {
        "flops_per_step": flops / per * devices,
        "bytes_per_step": nbytes / per * devices,
        "matmul_flops_per_step": mm_flops / per * devices,
        "model_flops_per_step": model_mm / per * devices,
        "steps": steps,
        "devices": devices,
        "program_executions": _round(ops.executions * devices, 6),
        "achieved_flops_per_s": _round(achieved_f * devices) if achieved_f is not None else None,
        "achieved_bytes_per_s": _round(achieved_b * devices) if achieved_b is not None else None,
        "mfu": _round(mfu), "hfu": _round(hfu),
        "bound": bound, "verdict": verdict, "verdict_basis": basis,
        "peak": peak.to_json() if peak else None,
        "matmul_dtype": dtype or None,
        "ridge_flops_per_byte": _round(peak_flops / peak_bw) if peak_flops and peak_bw else None,
        "latency_threshold_us": LATENCY_NS / 1e3,
        "unknown_flops_time_share": _round(unknown_ns / total_ns) if total_ns else None,
        "categories": categories,
        "ops": [_op_json(r, bounds[id(r)], peak, per, id(r) in l2) for r in rows[:TOP_OPS]],
        "notes": notes,
    }


def _op_json(r: OpRow, bound: Optional[str], peak: Optional[Peak], per: int = 1, l2: bool = False) -> dict[str, Any]:
    t = r.time_ns / 1e9
    share = roof_share(r, peak) if bound != "communication" and not l2 else None
    return {"name": r.name, "module": r.module, "category": r.category, "time_s": _round(t, 6),
            "time_per_step_s": _round(t / per, 6),
            "executions": _round(r.executions, 6), "flops": r.flops, "bytes": r.bytes, "intensity": _round(r.intensity),
            "flops_per_s": _round(r.flops / t) if r.flops is not None and t > 0 else None,
            "bytes_per_s": _round(r.bytes / t) if t > 0 else None, "bound": bound, "served_from_l2": l2,
            "roof_share": _round(share) if share is not None and share <= 1 else None}


def _verdict(profile: Profile, rows: list[OpRow], bounds: dict, peak: Optional[Peak], mfu: Optional[float],
             per: int, step_s: Optional[float], unknown_share: float, l2: frozenset = frozenset(),
             window: bool = False) -> tuple[Optional[str], str]:
    """The step's bound: whichever of host idle, exposed communication and the device's compute-,
    memory- and latency-bound op time takes most of the step (ops whose bound is unknown aside)."""
    devices = activity.of(profile).devices
    step_ns = step_s * 1e9 if step_s else None
    # idle (the idle view, which host-bound reads too) and exposed time as shares of the steps they were
    # measured in, then put on the step used for op time: never more than the whole step
    view = idle.of(profile)      # below host-bound's threshold idle time is no verdict, as the rule is silent
    idle_ns = view.host_share * step_ns if view and view.host_bound and step_ns else 0.0
    launch_ns = view.launch_share * step_ns if view and step_ns else 0.0     # gaps between launches: latency
    exposed = _device_share(devices, "exposed_ns") * step_ns if step_ns else 0.0
    by_bound: dict[str, float] = collections.defaultdict(float)
    for r in rows:
        if bounds[id(r)] != "communication":        # collectives count by their exposed time below
            by_bound[bounds[id(r)] or "unknown"] += r.time_ns / per
    if launch_ns:
        by_bound["latency"] = by_bound.get("latency", 0.0) + launch_ns
    times = {"host": idle_ns, "communication": exposed, **by_bound}
    known = {k: v for k, v in times.items() if k != "unknown" and v > 0}
    if not known:
        if by_bound.get("unknown") and peak is None:
            return None, ("compute or memory bound unknown without peaks: pass --peak-flops and --peak-bandwidth, "
                          "or run `advisor calibrate`")
        return None, "unknown: no op time measured"
    top = max(known, key=known.get)
    pct = _of_step(known[top], step_ns, profile.backend, window)
    if peak is None and times.get("unknown", 0) > known[top]:
        share = f" ({_of_step(times['unknown'], step_ns, profile.backend, window)})" if step_ns else ""
        return None, (f"compute- or memory-bound unknown without peaks: most time is in device ops{share}; pass "
                      "--peak-flops and --peak-bandwidth, or run `advisor calibrate`")
    caveat = ""
    if top in ("compute", "memory", "latency") and times.get("unknown", 0) > known[top]:
        caveat = (f"; more op time ({_of_step(times['unknown'], step_ns, profile.backend, window)}) "
                  "is in ops whose bound is unknown"
                  if step_ns else "; more op time is in ops whose bound is unknown")
        caveat += " (no FLOP count)" if peak is not None else " (no peaks: pass --peak-flops and --peak-bandwidth)"
    if top == "host":
        return "host", f"host-bound: the device is idle {pct}, waiting for the host"
    if top == "communication":
        return "communication", f"communication-bound: exposed collectives take {pct}"
    if top == "latency":
        short = [r for r in rows if bounds[id(r)] == "latency"]
        n = sum(r.executions for r in short) / per
        gaps = (f", and the device waits {_of_step(launch_ns, step_ns, profile.backend, window)} in gaps under "
                f"{idle.LAUNCH_GAP_NS / 1e3:g} µs between kernels launched one by one" if launch_ns else "")
        return "latency", (f"latency-bound: {n:,.0f} op executions {'in the traced window' if window else 'per step'} "
                           f"under {LATENCY_NS / 1e3:g} µs take "
                           f"{_of_step(by_bound.get('latency', 0.0) - launch_ns, step_ns, profile.backend, window)}"
                           f"{gaps}"
                           + caveat)
    if top == "compute":
        at = f"at {mfu:.1%} of peak {peak.dtype} matmul throughput (MFU)" if mfu is not None and peak else \
            "matmul throughput share unknown"
        return "compute", f"compute-bound: compute-bound ops take {pct}, {at}" + caveat
    mem = [r for r in rows if bounds[id(r)] == "memory"]
    hbm = [r for r in mem if id(r) not in l2]
    t = sum(r.time_ns for r in hbm) / 1e9
    rate = sum(r.bytes for r in hbm) / t if t > 0 else None
    share = _share(rate, _mean_roof(hbm, peak))
    names = ", ".join(r.name for r in mem[:3])
    memory = ("their memory roofs (cache or DRAM)" if peak and peak.roofs
              else "HBM bandwidth" if profile.backend in ("gpu", "tpu") else "the peak memory bandwidth")
    at = f"at {share:.0%} of {memory}" if share is not None and share <= 1 else "bandwidth share unknown"
    return "memory", f"memory-bandwidth-bound: memory-bound ops ({names}) take {pct}, {at}" + caveat


def _device_share(devices, field: str) -> float:
    """The mean over devices of a per-step time over that device's own step (0 without steps)."""
    shares = [min(1.0, getattr(d, field) / d.step_ns) for d in devices if d.step_ns]
    return sum(shares) / len(shares) if shares else 0.0


def _of_step(ns: float, step_ns: Optional[float], backend: str = "cpu", window: bool = False) -> str:
    """A time as a share of the step (window: of the traced window, in a trace without steps); op
    time summed over a device's threads (XLA:CPU runs ops side by side) or over kernels that run
    side by side (GPU streams, a CUDA graph's concurrent kernels) can exceed the step, and is then
    given in ms, never as a share above 100%."""
    if not step_ns:
        return "most of the device time"
    if ns <= step_ns:
        return f"{ns / step_ns:.0%} of the {'traced window' if window else 'step'}"
    over = "kernels that run side by side" if backend in ("gpu", "tpu") else "the threads that run ops side by side"
    return (f"{sig(ns / 1e6)} ms of op time per step summed over {over}, more than the {sig(step_ns / 1e6)} ms "
            f"{'traced window' if window else 'step'}")


def _rate(x: Optional[float]) -> str:
    return "-" if x is None else si(x, "FLOP/s")


def _bw(x: Optional[float]) -> str:
    return "-" if x is None else si(x, "B/s")
