"""Per-device activity in the steps: compute, collective transfer, waiting for peers, idle.

Each op event already carries the device that ran it (see `host_lines.cpu_op_line` and
`device_planes`); which ops are collectives comes from their HLO instruction's opcode, never
from the event's name (JAX names an all-reduce after its primitive, e.g. `psum_invariant.14`).
"""

from __future__ import annotations

import bisect
import re
from typing import Optional

import numpy as np

from ..categories import categorize
from ..model import CONTROL_FLOW, AllocatorPeak, DeviceActivity, HloModule, Step
from .columns import intersect, merged, overlap_in
from .ops import OpColumns

TOP_OPS = 12       # ops kept per device, by time: enough to say where a straggler's extra time goes
_GPU_INDEX = re.compile(r"/device:(?:GPU|TPU):(\d+)$")


def _in_steps(spans: tuple[np.ndarray, np.ndarray], steps: list[Step]) -> float:
    return overlap_in(spans[0], spans[1], [(s.start_ns, s.end_ns) for s in steps])


def _order(name: str) -> tuple:
    tail = name.rsplit(":", 1)[-1]
    return (name.rsplit(":", 1)[0], int(tail) if tail.isdigit() else 0)


_COMPUTE, _COLLECTIVE, _CONTROL = 0, 1, 2


def device_activity(host: str, device_ops: dict[str, OpColumns],
                    device_waits: dict[str, list[tuple[float, float]]], steps: list[Step],
                    modules: dict[str, HloModule], step_peak: Optional[int],
                    allocators: list[AllocatorPeak]) -> list[DeviceActivity]:
    """One `DeviceActivity` per device that ran ops, in device order; figures per step, or over
    the whole traced window (`steps` 0) when the trace has no steps."""
    device_ops = {name: ops for name, ops in device_ops.items() if len(ops)}
    if not steps:
        if not device_ops:
            return []
        start = min(float(ops.starts[0]) for ops in device_ops.values())
        end = max(float(ops.ends.max()) for ops in device_ops.values())
        steps = [Step(number=-1, start_ns=start, end_ns=end, annotated=False)]
    count = max(1, len(steps))
    total = sum(s.duration_ns for s in steps)
    out = []
    roles = {}     # the devices share one table of (module, op) keys: roles found once per table
    for name in sorted(device_ops, key=_order):
        ops = device_ops[name]
        if id(ops.pairs) not in roles:
            roles[id(ops.pairs)] = _roles(ops.pairs, modules)
        role, category = roles[id(ops.pairs)]
        keys, starts, ends = ops.keys, ops.starts, ops.ends
        durs = ends - starts
        busy = merged(starts, ends)
        uniq, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
        in_order = np.argsort(first, kind="stable")        # ops in the order the device first ran them
        key_ns = np.bincount(inverse, weights=durs, minlength=len(uniq))
        by_category: dict[str, float] = {}
        op_ns: dict[str, float] = {}
        for j in in_order.tolist():
            k = int(uniq[j])
            if role[k] != _CONTROL:
                by_category[category[k]] = by_category.get(category[k], 0.0) + float(key_ns[j])
            if role[k] == _COMPUTE:
                op = ops.pairs[k][1]
                op_ns[op] = op_ns.get(op, 0.0) + float(key_ns[j])
        key_role = np.array([role[int(k)] for k in uniq.tolist()], dtype=np.int64)[inverse]
        per_collective: dict[str, list[tuple[float, float]]] = {}
        for i in np.nonzero(key_role == _COLLECTIVE)[0].tolist():
            per_collective.setdefault(ops.pairs[int(keys[i])][1], []).append((float(starts[i]), float(ends[i])))
        compute = key_role == _COMPUTE
        collective = _merged_spans(span for spans in per_collective.values() for span in spans)
        wait_by_op = _waits_by_collective(device_waits.get(name, []), per_collective)
        busy_ns, coll_ns = _in_steps(busy, steps), _in_steps(collective, steps)
        hidden_ns = _in_steps(intersect(collective, merged(starts[compute], ends[compute])), steps)
        wait_ns = min(coll_ns, _in_steps(_merged_spans(w for ws in wait_by_op.values() for w in ws), steps))
        out.append(DeviceActivity(
            name=name, host=host,
            compute_ns=max(0.0, busy_ns - coll_ns) / count,
            transfer_ns=max(0.0, coll_ns - wait_ns) / count,
            wait_ns=wait_ns / count,
            exposed_ns=max(0.0, coll_ns - hidden_ns) / count,
            idle_ns=max(0.0, total - busy_ns) / count,
            step_ns=total / count, steps=count if steps[0].number != -1 else 0,
            collectives={op: _in_steps(_merged_spans(spans), steps) / count
                         for op, spans in sorted(per_collective.items())},
            collective_wait={op: _in_steps(_merged_spans(spans), steps) / count
                             for op, spans in sorted(wait_by_op.items())},
            peak_bytes=_peak(name, step_peak, allocators),
            time_by_category={c: ns / count for c, ns in sorted(by_category.items(), key=lambda kv: -kv[1])},
            top_ops={op: ns / count for op, ns in sorted(op_ns.items(), key=lambda kv: -kv[1])[:TOP_OPS]},
        ))
    return out


def _roles(pairs: list[tuple[str, str]], modules: dict[str, HloModule]) -> tuple[list[int], list[str]]:
    """For each (module, op) key: compute, collective or control flow, and its category; from the
    op's HLO instruction, once per key."""
    role, category = [], []
    for module, op in pairs:
        mod = modules.get(module)
        ins = mod.instructions.get(op) if mod else None
        control = ins is not None and ins.opcode in CONTROL_FLOW
        category.append("" if control else categorize(ins, op))
        if ins.collective if ins is not None else _is_collective_kernel(op):
            role.append(_COLLECTIVE)
        else:
            role.append(_CONTROL if control else _COMPUTE)
    return role, category


def _merged_spans(spans) -> tuple[np.ndarray, np.ndarray]:
    spans = list(spans)
    return merged(np.array([s for s, _ in spans], dtype=np.float64), np.array([e for _, e in spans], dtype=np.float64))


def _is_collective_kernel(name: str) -> bool:
    """A GPU kernel of NCCL/RCCL that no HLO instruction describes (e.g. a TensorFlow all-reduce):
    the kernel's own name, which the collective library gives it, not a framework's op name."""
    return name.startswith(("ncclKernel", "ncclDevKernel", "rcclKernel", "ncclAllReduce", "ncclAllGather",
                            "ncclReduceScatter"))


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
