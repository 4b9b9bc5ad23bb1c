"""Per-device totals over the steps: busy, collective, hidden and waiting time, time per op.

Facts only, summed over the window of steps (or the traced window when the trace has none): the
per-step means, idle and exposed time, the top ops and the slowest device are the activity view's
(advisor/views/activity.py).

Each op event already carries the device that ran it (see `host_lines.cpu_op_line` and
`device_planes`); which ops are collectives comes from their HLO instruction's opcode, never
from the event's name (JAX names an all-reduce after its primitive, e.g. `psum_invariant.14`).
"""

from __future__ import annotations

import bisect
import itertools
import re
from typing import Optional

import numpy as np

from ..categories import categorize
from ..model import CONTROL_FLOW, AllocatorPeak, DeviceTotals, HloModule, Step
from .columns import distinct, intersect, merged, overlap_in
from .op_accumulator import DeviceOps

_GPU_INDEX = re.compile(r"/device:(?:GPU|TPU):(\d+)$")


def _order(name: str) -> tuple:
    tail = name.rsplit(":", 1)[-1]
    return (name.rsplit(":", 1)[0], int(tail) if tail.isdigit() else 0)


_COMPUTE, _COLLECTIVE, _CONTROL = 0, 1, 2


SLICE_OPS = 1 << 18     # ops taken at a time: device activity is summed over slices of the trace's time
_SAMPLE_EVERY = 256     # one op start in this many is kept to cut the slices by


def device_totals(host: str, device_ops: Optional[DeviceOps], steps: list[Step],
                  modules: dict[str, HloModule], step_peak: Optional[int],
                  allocators: list[AllocatorPeak]) -> list[DeviceTotals]:
    """One `DeviceTotals` per device that ran ops, in device order: totals over the steps, or over
    the whole traced window (`steps` 0) when the trace has no steps.

    The ops are read block by block, twice: once for each device's time per op, once per slice
    of the trace's time for what overlaps (busy, collectives, waits), each slice with the ops of
    earlier slices that reach into it, so that memory holds a slice, not the trace."""
    if device_ops is None:
        return []
    role, category = _roles(device_ops.pairs, modules)
    totals = _Totals(device_ops)
    if not totals.order:
        return []
    if not steps:
        steps = [Step(number=-1, start_ns=float(totals.first_start.min()),
                      end_ns=float(totals.last_end.max()), annotated=False)]
    count = max(1, len(steps))
    total = sum(s.duration_ns for s in steps)
    overlap = _Overlap(device_ops, np.array(role, dtype=np.int64))
    for lo, hi in totals.slices():
        overlap.add_slice(lo, hi, [(max(s.start_ns, lo), min(s.end_ns, hi)) for s in steps
                                   if s.start_ns < hi and s.end_ns > lo])
    out = []
    for d in sorted(totals.order, key=lambda d: _order(device_ops.devices[d])):
        name = device_ops.devices[d]
        by_category: dict[str, float] = {}
        op_ns: dict[str, float] = {}
        for k in totals.order[d]:
            ns = float(totals.key_ns[d * len(role) + k])
            if role[k] != _CONTROL:
                by_category[category[k]] = by_category.get(category[k], 0.0) + ns
            if role[k] == _COMPUTE:
                op = device_ops.pairs[k][1]
                op_ns[op] = op_ns.get(op, 0.0) + ns
        busy_ns, coll_ns, hidden_ns, wait_total = overlap.sums[d]
        out.append(DeviceTotals(
            name=name, host=host, window_ns=total, steps=count if steps[0].number != -1 else 0,
            busy_ns=busy_ns, collective_ns=coll_ns, hidden_ns=hidden_ns, wait_ns=wait_total,
            collectives=dict(sorted(overlap.collectives.get(d, {}).items())),
            collective_wait=dict(sorted(overlap.collective_wait.get(d, {}).items())),
            collective_hidden=dict(sorted(overlap.collective_hidden.get(d, {}).items())),
            peak_bytes=_peak(name, step_peak, allocators),
            time_by_category=by_category, op_ns=op_ns,
        ))
    return out


class _Totals:
    """First pass: each device's time per op key (keys in the order the device first ran
    them), its earliest start and latest end, and a sample of op starts to cut slices by."""

    def __init__(self, device_ops: DeviceOps):
        width = len(device_ops.pairs)
        self.key_ns = np.zeros(len(device_ops.devices) * width)
        self.order: dict[int, list[int]] = {}
        self.first_start = np.full(len(device_ops.devices), np.inf)
        self.last_end = np.full(len(device_ops.devices), -np.inf)
        self.count = 0
        samples, seen = [], set()
        for device, starts, ends, keys in device_ops.blocks():
            code = device * width + keys
            self.key_ns += np.bincount(code, weights=ends - starts, minlength=len(self.key_ns))
            np.minimum.at(self.first_start, device, starts)
            np.maximum.at(self.last_end, device, ends)
            uniq, first = np.unique(code, return_index=True)
            for j in np.argsort(first, kind="stable").tolist():
                code_j = int(uniq[j])
                if code_j in seen:
                    continue
                seen.add(code_j)
                d, k = divmod(code_j, width)
                self.order.setdefault(d, []).append(k)
            self.count += len(starts)
            samples.append(starts[::_SAMPLE_EVERY].copy())      # a view would keep the block's column alive
        self.samples = np.sort(np.concatenate(samples)) if samples else np.empty(0)

    def slices(self) -> list[tuple[float, float]]:
        """Slices of time that each hold about SLICE_OPS op starts, covering all time."""
        pieces = -(-self.count // SLICE_OPS)
        if pieces <= 1 or not len(self.samples):
            return [(-np.inf, np.inf)]
        cuts = distinct(self.samples[(np.arange(1, pieces) * len(self.samples)) // pieces])
        edges = [-np.inf, *cuts.tolist(), np.inf]
        return list(zip(edges[:-1], edges[1:]))


class _Overlap:
    """Second pass, slice by slice: per device, how much of the steps its ops (busy), its
    collectives, collectives overlapped by compute (hidden) and its waits for peers cover."""

    def __init__(self, device_ops: DeviceOps, role: np.ndarray):
        self.device_ops, self.role = device_ops, role
        self.sums: dict[int, list[float]] = {}         # device -> [busy, collective, hidden, waits] ns
        self.collectives: dict[int, dict[str, float]] = {}
        self.collective_wait: dict[int, dict[str, float]] = {}
        self.collective_hidden: dict[int, dict[str, float]] = {}   # device -> op -> ns beside compute
        self._carry: dict[int, tuple] = {}             # device -> ops of earlier slices that end past them
        self._carry_waits: dict[int, list] = {}        # device -> (start, end, collective) waits that do

    def add_slice(self, lo: float, hi: float, steps: list[tuple[float, float]]) -> None:
        parts: dict[int, list[tuple]] = {}
        waits: dict[int, list[tuple]] = {}
        for device, starts, ends in self.device_ops.waits((lo, hi)):
            for d in distinct(device).tolist():
                mine = device == d
                waits.setdefault(d, []).append((starts[mine], ends[mine]))
        for device, starts, ends, keys in self.device_ops.blocks((lo, hi)):
            if (device == device[0]).all():
                parts.setdefault(int(device[0]), []).append((starts, ends, keys))
                continue
            for d in distinct(device).tolist():
                mine = device == d
                parts.setdefault(d, []).append((starts[mine], ends[mine], keys[mine]))
        for d in set(parts) | set(waits) | set(self._carry) | set(self._carry_waits):
            pieces = parts.get(d, [])
            if d in self._carry:
                pieces = [self._carry.pop(d), *pieces]
            starts, ends, keys = ((np.concatenate([p[k] for p in pieces]) if pieces else np.empty(0)) for k in range(3))
            self._device_slice(d, starts, ends, keys.astype(np.int64), hi, steps, waits.get(d, []))

    def _device_slice(self, d, starts, ends, keys, hi, steps, wait_pieces) -> None:
        sums = self.sums.setdefault(d, [0.0, 0.0, 0.0, 0.0])
        role = self.role[keys]
        pairs = self.device_ops.pairs
        per_collective: dict[str, list[tuple[float, float]]] = {}
        for i in np.nonzero(role == _COLLECTIVE)[0].tolist():
            per_collective.setdefault(pairs[int(keys[i])][1], []).append((float(starts[i]), float(ends[i])))
        compute = role == _COMPUTE
        collective = _merged_spans(span for spans in per_collective.values() for span in spans)
        sums[0] += overlap_in(*merged(starts, ends), steps)
        sums[1] += overlap_in(*collective, steps)
        sums[2] += overlap_in(*intersect(collective, merged(starts[compute], ends[compute])), steps)
        mine = self.collectives.setdefault(d, {})
        hidden = self.collective_hidden.setdefault(d, {})
        busy = merged(starts[compute], ends[compute])
        for op, spans in per_collective.items():
            own = _merged_spans(spans)
            mine[op] = mine.get(op, 0.0) + overlap_in(*own, steps)
            hidden[op] = hidden.get(op, 0.0) + overlap_in(*intersect(own, busy), steps)
        waits = sorted((s, e) for w_starts, w_ends in wait_pieces for s, e in zip(w_starts.tolist(), w_ends.tolist()))
        wait_by_op = _waits_by_collective(waits, per_collective)
        for start, end, op in self._carry_waits.pop(d, []):
            wait_by_op.setdefault(op, []).append((start, end))
        if wait_by_op:
            sums[3] += overlap_in(*_merged_spans(w for ws in wait_by_op.values() for w in ws), steps)
            mine = self.collective_wait.setdefault(d, {})
            for op, spans in wait_by_op.items():
                mine[op] = mine.get(op, 0.0) + overlap_in(*_merged_spans(spans), steps)
                later = [(s, e, op) for s, e in spans if e > hi]
                if later:
                    self._carry_waits.setdefault(d, []).extend(later)
        reach = ends > hi
        if reach.any():
            self._carry[d] = (starts[reach], ends[reach], keys[reach])


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
    """Each wait for peers, clipped to the collective it happened in: of those enclosing its
    start, the one that started last (a slice of the trace sees every collective that reaches
    into it, so the choice does not depend on where the slices are cut)."""
    spans = sorted((start, end, op) for op, ss in per_collective.items() for start, end in ss)
    starts = [s for s, _, _ in spans]
    reach = list(itertools.accumulate((e for _, e, _ in spans), max))    # the latest end up to each
    out: dict[str, list[tuple[float, float]]] = {}
    for start, end in waits:
        i = bisect.bisect_right(starts, start) - 1
        while i >= 0 and spans[i][1] <= start:
            i = i - 1 if reach[i] > start else -1
        if i >= 0:
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
