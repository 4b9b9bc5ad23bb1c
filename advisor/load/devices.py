"""Per-device activity in the steps: compute, collective transfer, waiting for peers, idle.

Each op event already carries the device that ran it (see `host_lines.cpu_op_events` and
`device_planes`); which ops are collectives comes from their HLO instruction's opcode, never
from the event's name (JAX names an all-reduce after its primitive, e.g. `psum_invariant.14`).
"""

from __future__ import annotations

import bisect
import re
from typing import Optional

from ..categories import categorize
from ..model import CONTROL_FLOW, AllocatorPeak, DeviceActivity, HloModule, Step, merge_intervals, overlap_ns

TOP_OPS = 12       # ops kept per device, by time: enough to say where a straggler's extra time goes
_GPU_INDEX = re.compile(r"/device:(?:GPU|TPU):(\d+)$")


def _in_steps(spans, steps: list[Step]) -> float:
    return sum(overlap_ns(spans, s.start_ns, s.end_ns) for s in steps)


def _order(name: str) -> tuple:
    tail = name.rsplit(":", 1)[-1]
    return (name.rsplit(":", 1)[0], int(tail) if tail.isdigit() else 0)


def device_activity(host: str, device_ops: dict[str, list[tuple[float, float, str, str]]],
                    device_waits: dict[str, list[tuple[float, float]]], steps: list[Step],
                    modules: dict[str, HloModule], step_peak: Optional[int],
                    allocators: list[AllocatorPeak]) -> list[DeviceActivity]:
    """One `DeviceActivity` per device that ran ops, in device order; figures per step, or over
    the whole traced window (`steps` 0) when the trace has no steps."""
    if not steps:
        starts = [ops[0][0] for ops in device_ops.values() if ops]
        if not starts:
            return []
        end = max(e for ops in device_ops.values() for _, e, _, _ in ops)
        steps = [Step(number=-1, start_ns=min(starts), end_ns=end, annotated=False)]
    count = max(1, len(steps))
    total = sum(s.duration_ns for s in steps)
    out = []
    for name in sorted(device_ops, key=_order):
        ops = device_ops[name]
        busy = merge_intervals((start, end) for start, end, _, _ in ops)
        per_collective: dict[str, list[tuple[float, float]]] = {}
        other: list[tuple[float, float]] = []
        op_ns: dict[str, float] = {}
        by_category: dict[str, float] = {}
        for start, end, module, op in ops:
            mod = modules.get(module)
            ins = mod.instructions.get(op) if mod else None
            if ins is None or ins.opcode not in CONTROL_FLOW:
                category = categorize(ins, op)
                by_category[category] = by_category.get(category, 0.0) + (end - start)
            if (ins.collective if ins is not None else _is_collective_kernel(op)):
                per_collective.setdefault(op, []).append((start, end))
            elif ins is None or ins.opcode not in CONTROL_FLOW:
                other.append((start, end))
                op_ns[op] = op_ns.get(op, 0.0) + (end - start)
        collective = merge_intervals(span for spans in per_collective.values() for span in spans)
        wait_by_op = _waits_by_collective(device_waits.get(name, []), per_collective)
        busy_ns, coll_ns = _in_steps(busy, steps), _in_steps(collective, steps)
        hidden_ns = _in_steps(_intersect(collective, merge_intervals(other)), steps)
        wait_ns = min(coll_ns, _in_steps(merge_intervals(w for ws in wait_by_op.values() for w in ws), steps))
        out.append(DeviceActivity(
            name=name, host=host,
            compute_ns=max(0.0, busy_ns - coll_ns) / count,
            transfer_ns=max(0.0, coll_ns - wait_ns) / count,
            wait_ns=wait_ns / count,
            exposed_ns=max(0.0, coll_ns - hidden_ns) / count,
            idle_ns=max(0.0, total - busy_ns) / count,
            step_ns=total / count, steps=count if steps[0].number != -1 else 0,
            collectives={op: _in_steps(merge_intervals(spans), steps) / count
                         for op, spans in sorted(per_collective.items())},
            collective_wait={op: _in_steps(merge_intervals(spans), steps) / count
                             for op, spans in sorted(wait_by_op.items())},
            peak_bytes=_peak(name, step_peak, allocators),
            time_by_category={c: ns / count for c, ns in sorted(by_category.items(), key=lambda kv: -kv[1])},
            top_ops={op: ns / count for op, ns in sorted(op_ns.items(), key=lambda kv: -kv[1])[:TOP_OPS]},
        ))
    return out


def _is_collective_kernel(name: str) -> bool:
    """A GPU kernel of NCCL/RCCL that no HLO instruction describes (e.g. a TensorFlow all-reduce):
    the kernel's own name, which the collective library gives it, not a framework's op name."""
    return name.startswith(("ncclKernel", "ncclDevKernel", "rcclKernel", "ncclAllReduce", "ncclAllGather",
                            "ncclReduceScatter"))


def _intersect(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Where two merged (sorted, disjoint) interval lists overlap."""
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        start, end = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if start < end:
            out.append((start, end))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def _waits_by_collective(waits, per_collective) -> dict[str, list[tuple[float, float]]]:
    """Each wait for peers, clipped to the collective it happened in (the one enclosing its start)."""
    spans = sorted((start, end, op) for op, ss in per_collective.items() for start, end in ss)
    starts = [s for s, _, _ in spans]
    out: dict[str, list[tuple[float, float]]] = {}
    for start, end in waits:
        i = bisect.bisect_right(starts, start) - 1
        if i >= 0 and spans[i][1] > start:
            out.setdefault(spans[i][2], []).append((start, min(end, spans[i][1])))
    return out


def _peak(name: str, step_peak: Optional[int], allocators: list[AllocatorPeak]) -> Optional[int]:
    """The device's allocator peak on GPU/TPU (`GPU_<i>_bfc`), else the step program's peak: on
    the CPU backend every device runs the same partitioned program, so each has its peak."""
    match = _GPU_INDEX.search(name)
    if match:
        kind = "GPU" if "GPU" in name else "TPU"
        for a in allocators:
            if a.allocator.startswith(f"{kind}_{match.group(1)}_"):
                return a.peak_bytes
    return step_peak


def estimate_peer_waits(devices: list[DeviceActivity]) -> list[str]:
    """Where a collective has no wait-for-peers events on any device (gloo across processes, GPU
    kernels), estimate each device's wait as its time in that collective beyond the shortest
    time any device spent in it per step: the last to arrive waits least, the difference is
    waiting for it. Returns the collectives so estimated (for the run's notes)."""
    estimated = []
    ops = sorted({op for d in devices for op in d.collectives})
    for op in ops:
        having = [d for d in devices if op in d.collectives]
        if len(having) < 2 or any(d.collective_wait.get(op, 0.0) > 0 for d in having):
            continue
        shortest = min(d.collectives[op] for d in having)
        for d in having:
            extra = d.collectives[op] - shortest
            d.collective_wait[op] = extra
            d.wait_ns += extra
            d.transfer_ns = max(0.0, d.transfer_ns - extra)
        estimated.append(op)
    return estimated
