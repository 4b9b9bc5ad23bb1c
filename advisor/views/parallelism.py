"""The run's parallelism (`runs[].summary.parallelism`): mesh, collectives by axis and role,
pipeline, state per axis, memory by kind.

A derived view, computed once per run from the step program's optimized HLO and the devices'
collective times; the rules read it (`of(profile)`), the renderers print it. The HLO keeps the
device layout (replica groups, source-target pairs) but not the mesh's axis names, so the axes
are inferred as (size, stride) over the device order and named from what runs over them (the axis
gradients are reduced over is `data`, the one a pipeline loop's permute ring runs over is `pipe`,
the one activation collectives inside the layers run over is `tensor`), unless the run recorded
its mesh (`advisor.trace(mesh=...)`, the bundled workloads) or the user passed `--mesh`.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Optional

from ..model import HloModule, Instruction, Profile
from .bound import cached, settings

ROLES = ("gradient-sync", "fsdp-gather", "fsdp-scatter", "pipeline-transfer", "tensor-parallel", "other")


@dataclasses.dataclass(frozen=True)
class Axis:
    name: str
    size: int
    stride: int         # in the device order: device d's coordinate is (d // stride) % size

    def coordinate(self, device: int) -> int:
        return (device // self.stride) % self.size


@dataclasses.dataclass
class CollectiveRow:
    """The collectives of one kind and role over one set of axes, per step on one device."""
    axis: str
    axis_size: int
    kind: str
    role: str
    count_per_step: float
    bytes_per_step: int
    time_s: float
    exposed_s: float
    instructions: list[str]

    def to_json(self) -> dict[str, Any]:
        return {"axis": self.axis, "axis_size": self.axis_size, "kind": self.kind, "role": self.role,
                "count_per_step": round(self.count_per_step, 3), "bytes_per_step": self.bytes_per_step,
                "time_s": round(self.time_s, 6), "exposed_s": round(self.exposed_s, 6)}


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


@dataclasses.dataclass
class State:
    bytes_per_device: int
    split_over: list[str]
    replicated_over: list[str]
    replicated_bytes: int           # of the state, the bytes copied over the data axes
    fsdp_saving_bytes: int          # replicated_bytes x (1 - 1/|data|)
    data_axis: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"bytes_per_device": self.bytes_per_device, "split_over": self.split_over,
                "replicated_over": self.replicated_over, "replicated_bytes": self.replicated_bytes,
                "fsdp_saving_bytes": self.fsdp_saving_bytes}


@dataclasses.dataclass
class Parallelism:
    axes: list[Axis]
    mesh_source: str                # "recorded", "given" (--mesh), "inferred"
    collectives: list[CollectiveRow]
    roles: dict[str, str]           # collective instruction -> role
    pipeline: Optional[Pipeline]
    state: Optional[State]
    memory_by_kind: dict[str, int]
    weight_dims: frozenset          # dims of weight-shaped arrays (parameters, their slices, gathered)
    notes: list[str] = dataclasses.field(default_factory=list)

    def axis(self, name: str) -> Optional[Axis]:
        return next((a for a in self.axes if a.name == name), None)

    def to_json(self) -> dict[str, Any]:
        return {"mesh": {"axes": [{"name": a.name, "size": a.size} for a in self.axes], "source": self.mesh_source},
                "collectives": [c.to_json() for c in self.collectives],
                "pipeline": self.pipeline.to_json() if self.pipeline else None,
                "state": self.state.to_json() if self.state else None,
                "memory_by_kind": dict(self.memory_by_kind),
                "notes": list(self.notes)}


def of(profile: Profile) -> Optional[Parallelism]:
    """The run's parallelism, with the mesh the user gave if any (the bound settings); None for a
    single device or a run whose step program has no HLO."""
    return cached(profile, "parallelism", lambda p: build(p, settings(p).mesh))


# -- building ---------------------------------------------------------------------------------------------

def build(profile: Profile, mesh: Optional[list[tuple[str, int]]] = None) -> Optional[Parallelism]:
    """None for a single device or a run whose step program has no HLO."""
    module = profile.modules.get(profile.step_module or "")
    devices = len(profile.device_activity)
    if module is None or devices < 2:
        return None
    listed = [i for i in module.collectives() if _groups(i)]
    n = max([devices] + [d + 1 for i in listed for g in _groups(i) for d in g])
    # no replica groups (and no pairs): the collective runs over every device of the program
    everyone = (tuple(range(n)),)
    collectives = [i if _groups(i) else dataclasses.replace(i, replica_groups=everyone)
                   for i in module.collectives() if _groups(i) or not i.source_target_pairs]
    given, source = _named_mesh(profile, mesh)
    if given and math.prod(size for _, size in given) != n:
        profile.notes.append(f"the mesh {', '.join(f'{a}={s}' for a, s in given)} ({source}) does not cover the "
                             f"run's {n} devices; its axes are inferred from the HLO instead")
        given, source = None, "inferred"
    axes = _axes_from(given) if given else _infer_axes(collectives, n)
    weights = state_dims(module)
    pipe_axis, pipeline_loop, schedule = _pipeline_ring(module, collectives, axes)
    schedule = _with_transposes(module, schedule, pipeline_loop)
    roles = {i.name: _role(i, module, weights, schedule) for i in collectives}
    spans = {i.name: _spanned(i, axes) for i in collectives}
    # a permute in the schedule loop over another axis than the stages' is a tensor-parallel ring
    # inside the stage (Part 5 with Part 4.2's rings)
    roles = {k: "tensor-parallel" if r == "pipeline-transfer" and pipe_axis is not None
             and [a.stride for a in spans[k]] != [pipe_axis.stride] else r for k, r in roles.items()}
    # over an axis that carries tensor-parallel rings, weight-shaped all-reduces sum the shares of the
    # leaves every device there holds whole (norms, embedding): tensor-parallel, and the axis no data axis
    rings = _ring_axes(collectives, axes) - ({pipe_axis.stride} if pipe_axis is not None else set())
    roles = {k: "tensor-parallel" if r == "gradient-sync" and spans[k] and {a.stride for a in spans[k]} <= rings
             else r for k, r in roles.items()}
    if not given:
        axes = _name_axes(axes, roles, spans)
        source = "inferred"
    else:
        roles = _roles_from_names(roles, spans)
    roles = _data_collectives_are_resharding(roles, spans, rings)
    names = {a.stride: a.name for a in axes}
    label = {k: "+".join(names[a.stride] for a in v) for k, v in spans.items()}
    weights |= _gathered_dims(module, roles)
    pipeline = _pipeline(profile, module, axes, pipe_axis, pipeline_loop)
    if pipeline is not None:
        pipeline.time_s = _loop_time(profile, module, schedule)
    state = _state(module, axes, roles, spans)
    view = Parallelism(axes=axes, mesh_source=source, collectives=_rows(profile, module, collectives, roles, spans, label),
                       roles=roles, pipeline=pipeline, state=state,
                       memory_by_kind=_memory_by_kind(profile, module, roles, weights), weight_dims=frozenset(weights))
    rings = [r for r in view.collectives if r.role == "tensor-parallel" and r.kind == "collective-permute"]
    if rings and profile.backend != "cpu":
        time_s = sum(r.time_s for r in rings)
        hidden = 1 - sum(r.exposed_s for r in rings) / time_s if time_s > 0 else 0.0
        view.notes.append(f"tensor-parallel permute rings: {hidden * 100:.1f}% of their {time_s * 1e3:.2f} ms per step "
                          "ran beside compute of the same device (hidden), the rest exposed (measured per collective)")
    if profile.backend == "cpu" and rings:
        view.notes.append("on the CPU backend a collective-permute is a blocking rendezvous of the device threads: "
                          "how much of a permute ring would hide behind the per-shard matmuls cannot be measured here")
    return view


def _groups(ins: Instruction) -> tuple[tuple[int, ...], ...]:
    """The device groups a collective runs in; a permute's are the connected sets of its pairs."""
    if ins.source_target_pairs:
        parent: dict[int, int] = {}

        def find(x):
            while parent.setdefault(x, x) != x:
                x = parent[x]
            return x
        for s, t in ins.source_target_pairs:
            parent[find(s)] = find(t)
        sets: dict[int, list[int]] = {}
        for d in list(parent):
            sets.setdefault(find(d), []).append(d)
        return tuple(tuple(sorted(v)) for v in sets.values())
    return tuple(g for g in ins.replica_groups if len(g) > 1)


def parse_mesh(value) -> list[tuple[str, int]]:
    """A mesh's axes, major first, as [(name, size), ...], from "data=2,pipe=2,tensor=2", a
    {name: size} mapping, [[name, size], ...] or a jax.sharding.Mesh. ValueError if it is none of them."""
    shape = getattr(value, "shape", None)
    if shape is not None and hasattr(value, "axis_names"):      # a jax.sharding.Mesh
        value = dict(shape)
    if isinstance(value, str):
        pairs = [p.split("=", 1) for p in value.split(",") if p.strip()]
        if not pairs or any(len(p) != 2 for p in pairs):
            raise ValueError(f"expected NAME=SIZE,... (e.g. data=2,pipe=2,tensor=2), got {value!r}")
        value = [(k.strip(), v.strip()) for k, v in pairs]
    items = list(value.items()) if isinstance(value, dict) else list(value or [])
    out = []
    for item in items:
        if not isinstance(item, (list, tuple)) or len(item) != 2:
            raise ValueError(f"expected (name, size) pairs, got {item!r}")
        name, size = str(item[0]), item[1]
        try:
            size = int(size)
        except (TypeError, ValueError):
            raise ValueError(f"axis {name!r}: size {size!r} is not a whole number") from None
        if not name or size < 1 or isinstance(item[1], bool):
            raise ValueError(f"axis {name!r}: needs a name and a size of at least 1")
        out.append((name, size))
    if not out or len({n for n, _ in out}) != len(out):
        raise ValueError("a mesh needs at least one axis, each named once")
    return out


def _named_mesh(profile: Profile, mesh) -> tuple[Optional[list[tuple[str, int]]], str]:
    if mesh:
        return parse_mesh(mesh), "given"
    recorded = profile.run_metadata.get("mesh")
    if recorded:
        try:
            return parse_mesh(recorded), "recorded"
        except ValueError as err:
            profile.notes.append(f"the mesh recorded with the run is not usable ({err}); its axes are inferred")
    return None, "inferred"


def _axes_from(named: list[tuple[str, int]]) -> list[Axis]:
    """Axes of a named mesh, major first (the device order of `Mesh(devices.reshape(sizes), names)`)."""
    out, stride = [], 1
    for name, size in reversed(named):
        out.append(Axis(name, size, stride))
        stride *= size
    return [a for a in reversed(out) if a.size > 1]


def _progression(group: tuple[int, ...]) -> Optional[tuple[int, int]]:
    """(size, stride) of a group whose sorted ids are evenly spaced, else None."""
    if len(group) < 2:
        return None
    stride = group[1] - group[0]
    if stride <= 0 or any(b - a != stride for a, b in zip(group, group[1:])):
        return None
    return len(group), stride


def _infer_axes(collectives: list[Instruction], n: int) -> list[Axis]:
    """The mesh's axes as (size, stride), from the groups that are one axis (evenly spaced ids),
    composites of smaller axes left out, gaps filled so the sizes multiply to the device count."""
    found = {p for i in collectives for g in _groups(i) if (p := _progression(g))}
    kept: set[tuple[int, int]] = set()
    for size, stride in sorted(found):
        # a group over a known axis and more: the known axis, and the rest as an axis of its own
        while size > 1 and (size, stride) not in kept:
            inner = next(((k, t) for k, t in sorted(kept) if t == stride and size % k == 0 and k < size), None)
            if inner is None:
                kept.add((size, stride))
                break
            size, stride = size // inner[0], stride * inner[0]
    # a tiling of the device order: strides chain (each axis starts where the smaller ones end)
    axes, expected = [], 1
    for size, stride in sorted(kept, key=lambda a: a[1]):
        if stride < expected or stride % expected:
            return [Axis(f"axis{size}s{stride}", size, stride) for size, stride in sorted(kept, key=lambda a: -a[1])]
        if stride > expected:
            axes.append((stride // expected, expected))
        axes.append((size, stride))
        expected = size * stride
    if expected < n and n % expected == 0:
        axes.append((n // expected, expected))
    return [Axis(f"axis{size}s{stride}", size, stride) for size, stride in sorted(axes, key=lambda a: -a[1])]


def _spanned(ins: Instruction, axes: list[Axis]) -> list[Axis]:
    """The axes along which the devices of a collective's groups differ."""
    out = []
    groups = _groups(ins)
    for a in axes:
        if any(len({a.coordinate(d) for d in g}) > 1 for g in groups):
            out.append(a)
    return out


def _squeeze(dims: tuple[int, ...]) -> tuple[int, ...]:
    i = 0
    while i < len(dims) - 1 and dims[i] == 1:
        i += 1
    return tuple(dims[i:])


def _with_suffixes(dims: tuple[int, ...]) -> set[tuple[int, ...]]:
    """A weight's dims, and for a stack of weights (rank 3 or more: stages, layers) each trailing slice."""
    d = _squeeze(dims)
    if len(d) < 2:
        return set()
    return {d[i:] for i in range(len(d) - 1)} if len(d) >= 3 else {d}


def state_dims(module: HloModule) -> set[tuple[int, ...]]:
    """Dims of the train state's arrays (parameters, optimizer state) on one device, stacked
    leading dimensions of 1 dropped, and their trailing slices (one stage's, one layer's weight)."""
    state = module.updated_parameters or frozenset(module.parameter_dims)
    out: set[tuple[int, ...]] = set()
    for n in state:
        out |= _with_suffixes(module.parameter_dims.get(n, ()))
    return out


def _gathered_dims(module: HloModule, roles: dict[str, str]) -> set[tuple[int, ...]]:
    out: set[tuple[int, ...]] = set()
    for name, role in roles.items():
        if role == "fsdp-gather":
            out |= _with_suffixes(module.instructions[name].dims)
    return out


def weight_like(dims: tuple[int, ...], weights, gradient: bool = False) -> bool:
    """Shaped like a weight: a parameter (or a slice of a stacked one, a gathered copy); for a
    gradient (`gradient`: made by the backward pass) also a stack of them with one leading
    dimension more (per-example gradients), whole or flattened per example. A forward buffer [batch, *weight] is an activation
    (e.g. [B, T, D] beside a [T, D] position embedding)."""
    d = _squeeze(tuple(dims))
    if len(d) < 2:
        return False
    if d in weights or (gradient and len(d) >= 3 and _squeeze(d[1:]) in weights):
        return True
    # per-example gradients flattened per example ([batch, prod(weight)], as a per-example norm reshapes them)
    return gradient and len(d) == 2 and any(len(w) >= 2 and math.prod(w) == d[1] for w in weights)


_RECOMPUTED = ("rematted_computation", "checkpoint")


def makes_gradients(ins: Optional[Instruction], training: bool) -> bool:
    """Whether an instruction computes gradients (or works on them): the backward pass's own ops
    (JAX's `transpose(...)`, not the forward recomputed there under remat), or, in a training step,
    ops outside differentiation altogether (gradient clipping, the optimizer)."""
    if ins is None:
        return False
    name = ins.op_name
    if "transpose(" in name:
        return not any(k in name for k in _RECOMPUTED)
    return training and "jvp(" not in name


def _role(ins: Instruction, module: HloModule, weights, schedule: set[str]) -> str:
    kind = ins.collective
    operands = [d for d in ins.operand_dims if d] or [ins.dims]
    if kind == "collective-permute":
        if any(_inside(module, ins.loop, loop) for loop in schedule):
            return "pipeline-transfer"
        return "tensor-parallel" if len(_squeeze(operands[0])) >= 2 else "other"
    if kind == "all-gather" and any(_is_weight(d, weights) for d in operands):
        return "fsdp-gather"
    if kind == "reduce-scatter" and _is_weight(ins.dims, weights):
        return "fsdp-scatter"
    if kind == "all-reduce" and any(_is_weight(d, weights) for d in operands):
        return "gradient-sync"
    if kind in ("all-gather", "reduce-scatter", "all-reduce", "all-to-all") and any(len(_squeeze(d)) >= 2
                                                                                   for d in operands):
        return "tensor-parallel"
    return "other"


def _is_weight(dims, weights) -> bool:
    """A collective's operand shaped like a weight, in any layout (SPMD partitioning may transpose it)."""
    d = _squeeze(tuple(dims))
    return len(d) >= 2 and (d in weights or any(len(w) == len(d) and sorted(w) == sorted(d) for w in weights))


_DATA_NAMES, _MODEL_NAMES = ("data", "dp", "batch", "replica", "fsdp"), ("tensor", "model", "tp", "mp")


def _roles_from_names(roles: dict[str, str], spans: dict[str, list]) -> dict[str, str]:
    """With the mesh's names known: an all-reduce over the model (tensor) axis alone reduces
    activations, whatever its shape resembles; weight-shaped all-reduces over the data axes only are
    gradients."""
    out = {}
    for name, role in roles.items():
        axes = {a.name.lower() for a in spans[name]}
        if role == "gradient-sync" and axes and axes <= set(_MODEL_NAMES):
            role = "tensor-parallel"
        out[name] = role
    return out


def _data_collectives_are_resharding(roles: dict[str, str], spans: dict[str, list],
                                     rings: set[int] = frozenset()) -> dict[str, str]:
    """Activation collectives over an axis the gradients are reduced (or FSDP-gathered) over are the
    SPMD partitioner's resharding there, not tensor parallelism: `other` (not over an axis that
    carries tensor-parallel rings)."""
    data = {spans[name][0].stride for name, role in roles.items()
            if role in ("gradient-sync", "fsdp-gather", "fsdp-scatter") and len(spans[name]) == 1} - set(rings)
    return {name: "other" if role == "tensor-parallel" and any(a.stride in data for a in spans[name]) else role
            for name, role in roles.items()}


def _inside(module: HloModule, loop: str, target: str) -> bool:
    """Whether `loop` is `target` or nested in it."""
    seen = 0
    while loop and seen < 64:
        if loop == target:
            return True
        loop = module.loops[loop].parent if loop in module.loops else ""
        seen += 1
    return False


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
            key = (ins.loop, tuple(a.stride for a in _spanned(ins, axes)))
            counts[key] = counts.get(key, 0) + 1
    return counts


def _ring_axes(collectives, axes) -> set[int]:
    """Strides of the axes that carry tensor-parallel rings (several permutes in one body)."""
    return {strides[0] for (_, strides), n in _permutes_per_body(collectives, axes).items()
            if n > 1 and len(strides) == 1}


def _pipeline_ring(module: HloModule, collectives, axes) -> tuple[Optional[Axis], str, set[str]]:
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
        spanned = _spanned(ins, axes)
        if loop is None or size is None or len(spanned) != 1 or spanned[0].size != size:
            continue
        if permutes.get((ins.loop, (spanned[0].stride,)), 0) > 1:
            continue
        if (loop.trip_count or 0) < size or spanned[0].name.lower() in _MODEL_NAMES:
            continue
        rings.append((spanned[0], loop))
        if best is None or (best[1].backward and not loop.backward):
            best = (spanned[0], loop)
    if best is None:
        return None, "", set()
    schedule = {loop.name for axis, loop in rings if axis == best[0] and loop.trip_count == best[1].trip_count}
    return best[0], best[1].name, schedule


def _pipeline(profile: Profile, module: HloModule, axes, axis: Optional[Axis], loop_name: str) -> Optional[Pipeline]:
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


def _with_transposes(module: HloModule, schedule: set[str], forward: str) -> set[str]:
    """The schedule loops, with the backward loops of the same trip count (the transpose of the
    forward schedule) where no permute ring marked them."""
    if not forward:
        return schedule
    trips = module.loops[forward].trip_count
    return set(schedule) | {n for n, lp in module.loops.items() if lp.backward and lp.trip_count == trips
                            and not lp.parent}


def _loop_time(profile: Profile, module: HloModule, loops: set[str]) -> float:
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
        if any(_inside(module, ins.loop, lp) for lp in loops):
            total += op.self_ns
    return total / devices / steps / 1e9


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
    stacked = {_squeeze(module.parameter_dims.get(n, ())) for n in module.updated_parameters}
    picks = set()
    for ins in module.instructions.values():
        if ins.loop != loop_name or not ins.does("dynamic-slice"):
            continue
        for dims in ins.operand_dims:
            d = _squeeze(dims)
            if d in stacked and len(d) >= 3 and d[0] > 1 and work % d[0] == 0:
                picks.add(d[0])
    if len(picks) > 1:
        return None
    return picks.pop() if picks else 1


def _name_axes(axes: list[Axis], roles: dict[str, str], spans: dict[str, list[Axis]]) -> list[Axis]:
    """Name inferred axes by what runs over them: data (gradients reduced, FSDP), pipe (the
    pipeline ring), tensor (activation collectives); the rest by size and stride."""
    votes: dict[int, str] = {}
    # the stage ring first: the stages also all-reduce the gradients of the leaves each holds whole
    for role, name in (("pipeline-transfer", "pipe"), ("gradient-sync", "data"), ("fsdp-gather", "data"),
                       ("fsdp-scatter", "data"), ("tensor-parallel", "tensor")):
        for ins, r in roles.items():
            if r == role and len(spans[ins]) == 1:
                votes.setdefault(spans[ins][0].stride, name)
    used: set[str] = set()
    out = []
    for a in axes:
        name = votes.get(a.stride)
        if name is None or name in used:
            name = a.name
        used.add(name)
        out.append(Axis(name, a.size, a.stride))
    return out


def _rows(profile: Profile, module: HloModule, collectives, roles, spans, label) -> list[CollectiveRow]:
    devices = profile.device_activity
    steps = max(1, len(profile.steps))
    first = profile.hosts[0].devices if profile.hosts else devices
    counts = {o.name: o.count / steps / max(1, len(first)) for o in profile.ops if o.module == profile.step_module}
    rows: dict[tuple[str, str, str], CollectiveRow] = {}
    for ins in collectives:
        having = [d for d in devices if ins.name in d.collectives]
        time_ns = sum(d.collectives[ins.name] for d in having) / len(having) if having else 0.0
        # measured per collective: its time with no compute of the device beside it
        exposed_ns = sum(max(0.0, d.collectives[ins.name] - d.collective_hidden.get(ins.name, 0.0))
                         for d in having) / len(having) if having else 0.0
        per_step = counts.get(ins.name, 0.0)
        size = math.prod(a.size for a in spans[ins.name]) or 1
        key = (label[ins.name], ins.collective, roles[ins.name])
        row = rows.get(key) or CollectiveRow(label[ins.name] or "?", size, ins.collective, roles[ins.name],
                                             0.0, 0, 0.0, 0.0, [])
        row.count_per_step += per_step
        row.bytes_per_step += int(ins.bytes_moved(size) * per_step)
        row.time_s += time_ns / 1e9
        row.exposed_s += exposed_ns / 1e9
        row.instructions.append(ins.name)
        rows[key] = row
    return sorted(rows.values(), key=lambda r: (-r.time_s, r.axis, r.kind))


def _state(module: HloModule, axes: list[Axis], roles, spans) -> Optional[State]:
    """The train state per device, the axes it is split over and the ones it is copied over (the
    axes its gradients are all-reduced over: each device there holds the same copy)."""
    updated = module.updated_parameters
    if not updated:
        return None
    total = sum(module.parameter_bytes.get(n, 0) for n in updated)
    copies = [module.parameter_copies.get(n) for n in updated]
    if all(c is not None for c in copies):
        return _state_from_shardings(module, axes, total)
    reduced_over: dict[int, set[tuple[int, ...]]] = {}
    for name, role in roles.items():
        if role == "gradient-sync":
            ins = module.instructions[name]
            for a in spans[name]:
                reduced_over.setdefault(a.stride, set()).update(tuple(sorted(_squeeze(d))) for d in ins.operand_dims
                                                                if d)
    replicated, copied = [], 0
    data_axis = ""
    for a in axes:
        shapes = reduced_over.get(a.stride, set())
        bytes_ = sum(module.parameter_bytes.get(n, 0) for n in updated
                     if tuple(sorted(_squeeze(module.parameter_dims.get(n, ())))) in shapes)
        if bytes_ >= 0.5 * total and bytes_ > 0:
            replicated.append(a)
            if bytes_ > copied:
                copied, data_axis = bytes_, a.name
    split = [a.name for a in axes if a not in replicated]
    data = next((a for a in axes if a.name == data_axis), None)
    saving = int(copied * (1 - 1 / data.size)) if data else 0
    return State(bytes_per_device=total, split_over=split, replicated_over=[a.name for a in replicated],
                 replicated_bytes=copied, fsdp_saving_bytes=saving, data_axis=data_axis)


def _state_from_shardings(module: HloModule, axes: list[Axis], total: int) -> State:
    """The same, read from the state's own shardings in the HLO (the devices holding each leaf's
    copy): exact where the gradients' all-reduces are combined over several axes (SPMD partitioning)."""
    copied: dict[str, int] = {}
    for a in axes:
        along = {k * a.stride for k in range(a.size)}
        copied[a.name] = sum(module.parameter_bytes.get(n, 0) for n in module.updated_parameters
                             if module.parameter_copies[n] == () or along <= set(module.parameter_copies[n]))
    replicated = [a for a in axes if copied[a.name] > 0 and copied[a.name] >= 0.5 * total]
    data = max(replicated, key=lambda a: (copied[a.name], a.name in _DATA_NAMES), default=None)
    saving = int(copied[data.name] * (1 - 1 / data.size)) if data else 0
    return State(bytes_per_device=total, split_over=[a.name for a in axes if a not in replicated],
                 replicated_over=[a.name for a in replicated], replicated_bytes=copied[data.name] if data else 0,
                 fsdp_saving_bytes=saving, data_axis=data.name if data else "")


def _memory_by_kind(profile: Profile, module: HloModule, roles, weights) -> dict[str, int]:
    """The step program's buffers live at its memory peak (one device), by what they hold."""
    memory = profile.memory
    if memory is None:
        return {}
    training = any("transpose(" in i.op_name for i in module.instructions.values())
    out = dict.fromkeys(("state", "inputs", "gathered_weights", "gradients", "activations", "outputs",
                         "temporaries"), 0)
    for b in memory.buffers:
        ins = module.instructions.get(b.instruction)
        dims = ins.dims if ins is not None else ()
        if b.group == "Parameter":
            kind = "state" if weight_like(dims, weights) else "inputs"
        elif b.group == "Output":
            kind = "outputs"
        elif ins is not None and roles.get(ins.name) == "fsdp-gather":
            kind = "gathered_weights"
        elif weight_like(dims, weights, gradient=makes_gradients(ins, training)):
            # forward: gathered or sliced weights; backward: their gradients
            kind = "gradients" if ins is None or "transpose(" in ins.op_name else "gathered_weights"
        elif ins is not None and len(_squeeze(dims)) >= 2 and "transpose(" not in ins.op_name:
            kind = "activations"
        else:
            kind = "temporaries"
        out[kind] += b.bytes
    return {k: v for k, v in out.items() if v}
