"""The step's ops with the work they do (`views.ops.of(profile)`): each op of every program whose HLO
the trace holds, its measured time on one device and the FLOPs and bytes its HLO instruction does
over that time, counted once per execution of its program (advisor/load/hlo_cost.py); and what
bounds an op against a peak (compute, memory, latency). The efficiency view and the rules read the
same rows.

An op's work is its HLO instruction's cost times its executions: the program's executions
(counted from the ops that run once per execution) times the trip counts of the loops around it,
never once per kernel (an op that launches two kernels is counted once per execution). Time is one
device's: the mean over the devices that ran the program.
"""
from __future__ import annotations

import collections
import dataclasses
from typing import Any, Optional

from ..categories import categorize
from ..model import Instruction, OpStat, Profile
from ..peak_table import Peak
from .bound import cached

LATENCY_NS = 5_000.0          # an op execution shorter than this cannot reach either roof (launch latency)
_REMAT = "rematted_computation"


@dataclasses.dataclass
class OpRow:
    """One op of the step program on one device (the mean over devices): its measured time and the
    work its HLO instruction does over that time."""
    name: str
    module: str
    instruction: Instruction
    category: str
    time_ns: float                  # self time over the window
    executions: float               # executions over the window
    flops: Optional[float]          # over the window; None when the HLO does not say
    transcendentals: float
    bytes: float
    remat: bool                     # recomputation added by remat

    @property
    def ns_per_execution(self) -> float:
        return self.time_ns / self.executions if self.executions else self.time_ns

    @property
    def intensity(self) -> Optional[float]:
        return self.flops / self.bytes if self.flops is not None and self.bytes > 0 else None

    @property
    def matmul(self) -> bool:
        return self.instruction.is_matmul


@dataclasses.dataclass(frozen=True)
class OpRows:
    rows: list[OpRow]
    executions: float               # executions of the step program per device over the window
    devices: int                    # devices the program ran on
    steps: int                      # steps the figures are over (0: the trace has none, figures over its window)
    notes: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"ops": len(self.rows), "executions": self.executions, "devices": self.devices, "steps": self.steps}


def _devices_of(profile: Profile, ops: list[OpStat]) -> int:
    planes = {o.device for o in ops}
    if planes and planes != {""}:
        return len(planes)
    return max(1, len(profile.hosts[0].devices)) if profile.hosts else 1


def of(profile: Profile) -> Optional[OpRows]:
    """The ops of the programs that ran, with their work; None without the step program's HLO."""
    return cached(profile, "ops", _build)


def _build(profile: Profile) -> Optional[OpRows]:
    """Every op of every program with HLO that ran in the window (the step program and any other the
    steps ran, e.g. an optimizer update jitted apart), each program's executions counted from its ops."""
    if profile.modules.get(profile.step_module or "") is None:
        return None
    by_module: dict[str, list[OpStat]] = collections.defaultdict(list)
    for o in profile.ops:
        if o.module in profile.modules:
            by_module[o.module].append(o)
    devices = _devices_of(profile, [o for ops in by_module.values() for o in ops])
    rows, step_executions = [], 0.0
    for key, ops in by_module.items():
        executions, module_rows = _module_rows(profile.modules[key], ops, devices, len(profile.steps))
        rows.extend(module_rows)
        if key == profile.step_module:
            step_executions = executions
    rows.sort(key=lambda r: -r.time_ns)
    return OpRows(rows, step_executions, devices, len(profile.steps))


def _module_rows(module, ops: list[OpStat], devices: int, steps: int) -> tuple[float, list[OpRow]]:
    time: dict[str, float] = collections.defaultdict(float)
    count: dict[str, int] = collections.defaultdict(int)
    for o in ops:
        time[o.name] += o.self_ns
        count[o.name] += o.count
    # the program's executions: the usual count of the ops that run once per execution (an op that
    # launches several kernels counts more, one the trace missed less)
    once = [count[n] / devices for n in count
            if (i := module.instructions.get(n)) is not None and i.runs == 1.0 and i.cost is not None]
    executions = collections.Counter(once).most_common(1)[0][0] if once else float(steps or 1)
    rows = []
    for name, ns in time.items():
        ins = module.instructions.get(name)
        if ins is None or ins.cost is None or ins.opcode in ("while", "call", "conditional"):
            continue
        runs = ins.runs * executions if ins.runs is not None else count[name] / devices
        cost = ins.cost
        rows.append(OpRow(name=name, module=module.key, instruction=ins, category=categorize(ins, name),
                          time_ns=ns / devices,
                          executions=runs, flops=cost.flops * runs if cost.flops is not None else None,
                          transcendentals=cost.transcendentals * runs, bytes=cost.bytes * runs,
                          remat=_REMAT in ins.op_name))
    return executions, rows


def matmul_dtype(rows: list[OpRow]) -> str:
    """The operand dtype of most matmul FLOPs ("" without matmuls)."""
    by_dtype: dict[str, float] = collections.defaultdict(float)
    for r in rows:
        if r.matmul and r.flops:
            by_dtype[r.instruction.matmul_dtype or r.instruction.dtype] += r.flops
    return max(by_dtype, key=by_dtype.get) if by_dtype else ""


def op_bound(row: OpRow, peak: Optional[Peak]) -> Optional[str]:
    if row.instruction.collective:
        return "communication"      # judged by its exposed time (the devices' activity), not by a roofline
    if row.ns_per_execution < LATENCY_NS:
        return "latency"
    if peak is None or not peak.flops_per_s or not peak.bytes_per_s:
        return None
    if row.flops is None:
        return None
    intensity = row.flops / row.bytes if row.bytes > 0 else float("inf")
    return "compute" if intensity >= peak.flops_per_s / bandwidth_roof(row, peak) else "memory"


def bandwidth_roof(row: OpRow, peak: Peak) -> Optional[float]:
    """The bandwidth the op can reach: the peak's, or with advisor calibrate's cache and DRAM roofs, the
    fastest of a level its working set (the bytes one execution moves) fits in."""
    return peak.bandwidth_for(row.bytes / row.executions if row.executions else row.bytes)


def roof_share(r: OpRow, peak: Optional[Peak]) -> Optional[float]:
    """The op's time at its roof over its measured time: how close it runs to what the peaks allow at
    its intensity (None without both peaks, FLOPs or time; above 1 means a peak that cannot be right)."""
    if peak is None or not peak.flops_per_s or not peak.bytes_per_s or r.flops is None or r.time_ns <= 0:
        return None
    at_roof_s = max(r.flops / peak.flops_per_s, r.bytes / bandwidth_roof(r, peak))
    return at_roof_s / (r.time_ns / 1e9)


def served_from_l2(r: OpRow, peak: Optional[Peak]) -> bool:
    """Whether the op moves its bytes faster than the HBM peak allows while one execution's traffic
    fits in the device's L2: its data was on chip (just written by the op before), not in HBM."""
    if peak is None or not peak.bytes_per_s or not peak.l2_bytes or r.time_ns <= 0 or not r.executions:
        return False
    return r.bytes / (r.time_ns / 1e9) > peak.bytes_per_s and r.bytes / r.executions <= peak.l2_bytes
