"""A pipeline's schedule in the step program: the loop whose body passes a permute ring around one
whole axis (the stages), its microbatches and loops (as the run recorded them, else read from the
program) and the op time inside its schedule loops, from which the bubble and its fix follow."""

from __future__ import annotations

import dataclasses
from typing import Any, Optional

from ...model import HloModule, Instruction, Profile
from .mesh import MODEL_NAMES, Axis, spanned
from .weights import squeeze


@dataclasses.dataclass
class Pipeline:
    stages: int
    microbatches: Optional[int]     # None where neither the program nor the run says
    loops: Optional[int]
    iterations: int                 # the schedule loop's trip count
    axis: str
    loop: str                       # the forward schedule loop (HLO while instruction)
    source: str                     # where microbatches/loops come from: "recorded", "program"
    time_s: float = 0.0             # per step on one device: ops inside the schedule loops

    @property
    def padding_iterations(self) -> int:
        return self.stages - 1

    @property
    def bubble_fraction(self) -> float:
        """Share of each stage's loop iterations spent on padding: (S - 1) / (L*M + S - 1)."""
        return self.padding_iterations / self.iterations if self.iterations else 0.0

    @property
    def work_iterations(self) -> int:
        """L * M: the iterations that carry a microbatch on every stage."""
        return self.iterations - self.padding_iterations

    def bubble_with(self, microbatches: int) -> float:
        """The bubble with `microbatches` (loops unchanged): (S - 1) / (L*M' + S - 1)."""
        work = microbatches * (self.loops or 1) if self.microbatches else microbatches
        return self.padding_iterations / (work + self.padding_iterations)

    def time_with(self, microbatches: int) -> float:
        """The schedule's time with `microbatches`, the same work cut finer: each iteration's work
        scales with 1/(L*M), so the schedule takes W (1 + (S-1)/(L*M)) (per-microbatch utilization unchanged)."""
        now = 1 + self.padding_iterations / max(1, self.work_iterations)
        work = microbatches * (self.loops or 1) if self.microbatches else microbatches
        return self.time_s * (1 + self.padding_iterations / work) / now

    def to_json(self) -> dict[str, Any]:
        return {"stages": self.stages, "microbatches": self.microbatches, "loops": self.loops,
                "iterations": self.iterations, "padding_iterations": self.padding_iterations,
                "bubble_fraction": round(self.bubble_fraction, 4), "axis": self.axis,
                "time_s": round(self.time_s, 6)}


def pipeline_ring(module: HloModule, collectives, axes) -> tuple[Optional[Axis], str, set[str]]:
    """The pipeline's stage axis and schedule loop: a loop whose body passes a permute ring around
    one whole axis, for at least as many iterations as the ring has stages. Both the forward loop
    and its transpose (the backward schedule) carry the ring; the pipeline is named by the forward
    one. A loop whose body holds several rings over the axis is a layer scan of tensor-parallel
    blocks (_permutes_per_body), as is any ring over an axis the mesh names as a model axis. Returns
    (axis, forward loop, every schedule loop)."""
    best, rings = None, []
    permutes = _permutes_per_body(collectives, axes)
    for ins in collectives:
        if ins.collective != "collective-permute" or not ins.loop:
            continue
        loop = module.loops.get(ins.loop)
        size = _ring(ins)
        over = spanned(ins, axes)
        if loop is None or size is None or len(over) != 1 or over[0].size != size:
            continue
        if permutes.get((ins.loop, (over[0].stride,)), 0) > 1:
            continue
        if (loop.trip_count or 0) < size or over[0].name.lower() in MODEL_NAMES:
            continue
        rings.append((over[0], loop))
        if best is None or (best[1].backward and not loop.backward):
            best = (over[0], loop)
    if best is None:
        return None, "", set()
    schedule = {loop.name for axis, loop in rings if axis == best[0] and loop.trip_count == best[1].trip_count}
    return best[0], best[1].name, schedule


def stages_of(profile: Profile, module: HloModule, axes, axis: Optional[Axis], loop_name: str) -> Optional[Pipeline]:
    """The pipeline whose stages are `axis` and whose forward schedule loop is `loop_name` (from
    pipeline_ring); None without a stage axis."""
    if axis is None:
        return None
    name = next((a.name for a in axes if a.stride == axis.stride and a.size == axis.size), axis.name)
    loop = module.loops[loop_name]
    iterations = loop.trip_count or 0
    work = iterations - (axis.size - 1)
    micro, loops, source = _recorded_pipeline(profile, axis.size)
    if micro is None:
        loops = _stage_loops(module, loop_name, work)
        micro, source = (work // loops if loops else None), "program"
    return Pipeline(stages=axis.size, microbatches=micro, loops=loops, iterations=iterations,
                    axis=name, loop=loop_name, source=source)


def _recorded_pipeline(profile: Profile, stages: int) -> tuple[Optional[int], Optional[int], str]:
    """(microbatches, loops) a bundled workload's config records for this pipeline, else (None, None)."""
    meta = profile.run_metadata if isinstance(profile.run_metadata, dict) else {}
    p = ((meta.get("config") or {}).get("parallel") or {}) if meta.get("workload") else {}
    if p.get("pipeline.stages") == stages and p.get("pipeline.microbatches"):
        return int(p["pipeline.microbatches"]), int(p.get("pipeline.loops", 1)), "recorded"
    return None, None, "recorded"


def _stage_loops(module: HloModule, loop_name: str, work: int) -> Optional[int]:
    """Layers per stage of a looping pipeline: inside the schedule loop, a dynamic slice picks one
    of L stacked stage weights each iteration (L > 1 dividing the L*M work iterations). A plain
    pipeline picks none (its stage weights are a fixed [1, ...] slice): 1 loop."""
    stacked = {squeeze(module.parameter_dims.get(n, ())) for n in module.updated_parameters}
    picks = set()
    for ins in module.instructions.values():
        if ins.loop != loop_name or not ins.does("dynamic-slice"):
            continue
        for dims in ins.operand_dims:
            d = squeeze(dims)
            if d in stacked and len(d) >= 3 and d[0] > 1 and work % d[0] == 0:
                picks.add(d[0])
    if len(picks) > 1:
        return None
    return picks.pop() if picks else 1


def with_transposes(module: HloModule, schedule: set[str], forward: str) -> set[str]:
    """The schedule loops, with the backward loops of the same trip count (the transpose of the
    forward schedule) where no permute ring marked them."""
    if not forward:
        return schedule
    trips = module.loops[forward].trip_count
    return set(schedule) | {n for n, lp in module.loops.items() if lp.backward and lp.trip_count == trips
                            and not lp.parent}


def loop_time(profile: Profile, module: HloModule, loops: set[str]) -> float:
    """Op time per step on one device inside the loops (nested ones included)."""
    devices = max(1, len(profile.hosts[0].devices)) if profile.hosts else 1
    steps = max(1, len(profile.steps))
    total = 0.0
    for op in profile.ops:
        if op.module != profile.step_module:
            continue
        ins = module.instructions.get(op.name)
        if ins is None or ins.opcode in ("while", "conditional", "call"):
            continue
        if any(module.in_loop(ins.loop, lp) for lp in loops):
            total += op.self_ns
    return total / devices / steps / 1e9


def _ring(ins: Instruction) -> Optional[int]:
    """The cycle length when a permute's pairs are cycles of one length (a ring), else None."""
    nxt = dict(ins.source_target_pairs)
    if not nxt or len(nxt) != len(set(nxt.values())):
        return None
    lengths = set()
    for start in nxt:
        d, k = nxt[start], 1
        while d != start and d in nxt and k <= len(nxt):
            d, k = nxt[d], k + 1
        if d != start:
            return None
        lengths.add(k)
    return lengths.pop() if len(lengths) == 1 else None


def _permutes_per_body(collectives, axes) -> dict[tuple, int]:
    """Collective-permutes per (loop, axes spanned): a loop body (or the program outside loops, "")
    holding several over one axis runs rings of tensor-parallel blocks (Part 4.2: a gather ring before
    a block's first matmul, a scatter ring after its second); a pipeline passes one per iteration."""
    counts: dict[tuple, int] = {}
    for ins in collectives:
        if ins.collective == "collective-permute" and _ring(ins):
            key = (ins.loop, tuple(a.stride for a in spanned(ins, axes)))
            counts[key] = counts.get(key, 0) + 1
    return counts


def ring_axes(collectives, axes) -> set[int]:
    """Strides of the axes that carry tensor-parallel rings (several permutes in one body)."""
    return {strides[0] for (_, strides), n in _permutes_per_body(collectives, axes).items()
            if n > 1 and len(strides) == 1}
