"""The run's parallelism (`runs[].summary.parallelism`): mesh, collectives by axis and role,
pipeline, state per axis, memory by kind.

A derived view, computed once per run from the step program's optimized HLO and the devices'
collective times; the rules read it (`of(profile)`), the renderers print it. The HLO keeps the
device layout (replica groups, source-target pairs) but not the mesh's axis names, so the axes
are inferred as (size, stride) over the device order and named from what runs over them (the axis
gradients are reduced over is `data`, the one a pipeline loop's permute ring runs over is `pipe`,
the one activation collectives inside the layers run over is `tensor`), unless the run recorded
its mesh (`advisor.trace(mesh=...)`, the bundled workloads) or the user passed `--mesh`.

Its parts: `mesh` (the axes), `weights` (what is shaped like a weight), `pipeline` (the schedule
loop and its stages), `roles` (what each collective does), `collectives` (the rows by axis, kind
and role), `state` (the train state per axis, memory by kind). This module puts them together.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Optional

from ...model import Profile
from ..bound import cached, settings
from .collectives import CollectiveRow, rows
from .mesh import Axis, axes_from, groups, infer_axes, named_mesh, spanned
from .pipeline import Pipeline, loop_time, pipeline_ring, ring_axes, stages_of, with_transposes
from .roles import data_collectives_are_resharding, name_axes, role, roles_from_names
from .state import State, memory_by_kind, train_state
from .weights import gathered_dims, state_dims


@dataclasses.dataclass(frozen=True)
class Parallelism:
    axes: list[Axis]
    mesh_source: str                # "recorded", "given" (--mesh), "inferred"
    collectives: list[CollectiveRow]
    roles: dict[str, str]           # collective instruction -> role
    pipeline: Optional[Pipeline]
    state: Optional[State]
    memory_by_kind: dict[str, int]
    weight_dims: frozenset          # dims of weight-shaped arrays (parameters, their slices, gathered)
    remarks: tuple[str, ...] = ()   # what the JSON's parallelism section says about its figures
    notes: tuple[str, ...] = ()     # the run's notes (a mesh that cannot be used)

    def axis(self, name: str) -> Optional[Axis]:
        return next((a for a in self.axes if a.name == name), None)

    def to_json(self) -> dict[str, Any]:
        return {"mesh": {"axes": [{"name": a.name, "size": a.size} for a in self.axes], "source": self.mesh_source},
                "collectives": [c.to_json() for c in self.collectives],
                "pipeline": self.pipeline.to_json() if self.pipeline else None,
                "state": self.state.to_json() if self.state else None,
                "memory_by_kind": dict(self.memory_by_kind),
                "notes": list(self.remarks)}


def of(profile: Profile) -> Optional[Parallelism]:
    """The run's parallelism, with the mesh the user gave if any (the bound settings); None for a
    single device or a run whose step program has no HLO."""
    return cached(profile, "parallelism", lambda p: build(p, settings(p).mesh))


# -- building ---------------------------------------------------------------------------------------------

def build(profile: Profile, mesh: Optional[list[tuple[str, int]]] = None) -> Optional[Parallelism]:
    """None for a single device or a run whose step program has no HLO."""
    module = profile.modules.get(profile.step_module or "")
    devices = len(profile.device_totals)
    if module is None or devices < 2:
        return None
    listed = [i for i in module.collectives() if groups(i)]
    n = max([devices] + [d + 1 for i in listed for g in groups(i) for d in g])
    # no replica groups (and no pairs): the collective runs over every device of the program
    everyone = (tuple(range(n)),)
    collectives = [i if groups(i) else dataclasses.replace(i, replica_groups=everyone)
                   for i in module.collectives() if groups(i) or not i.source_target_pairs]
    given, source, notes = named_mesh(profile, mesh)
    if given and math.prod(size for _, size in given) != n:
        notes.append(f"the mesh {', '.join(f'{a}={s}' for a, s in given)} ({source}) does not cover the "
                             f"run's {n} devices; its axes are inferred from the HLO instead")
        given, source = None, "inferred"
    axes = axes_from(given) if given else infer_axes(collectives, n)
    weights = state_dims(module)
    pipe_axis, pipeline_loop, schedule = pipeline_ring(module, collectives, axes)
    schedule = with_transposes(module, schedule, pipeline_loop)
    roles = {i.name: role(i, module, weights, schedule) for i in collectives}
    spans = {i.name: spanned(i, axes) for i in collectives}
    # a permute in the schedule loop over another axis than the stages' is a tensor-parallel ring
    # inside the stage (Part 5 with Part 4.2's rings)
    roles = {k: "tensor-parallel" if r == "pipeline-transfer" and pipe_axis is not None
             and [a.stride for a in spans[k]] != [pipe_axis.stride] else r for k, r in roles.items()}
    # over an axis that carries tensor-parallel rings, weight-shaped all-reduces sum the shares of the
    # leaves every device there holds whole (norms, embedding): tensor-parallel, and the axis no data axis
    rings = ring_axes(collectives, axes) - ({pipe_axis.stride} if pipe_axis is not None else set())
    roles = {k: "tensor-parallel" if r == "gradient-sync" and spans[k] and {a.stride for a in spans[k]} <= rings
             else r for k, r in roles.items()}
    if not given:
        axes = name_axes(axes, roles, spans)
        source = "inferred"
    else:
        roles = roles_from_names(roles, spans)
    roles = data_collectives_are_resharding(roles, spans, rings)
    names = {a.stride: a.name for a in axes}
    label = {k: "+".join(names[a.stride] for a in v) for k, v in spans.items()}
    weights |= gathered_dims(module, roles)
    pipeline = stages_of(profile, module, axes, pipe_axis, pipeline_loop)
    if pipeline is not None:
        pipeline.time_s = loop_time(profile, module, schedule)
    state = train_state(module, axes, roles, spans)
    collective_rows = rows(profile, module, collectives, roles, spans, label)
    remarks = []
    rings = [r for r in collective_rows if r.role == "tensor-parallel" and r.kind == "collective-permute"]
    if rings and profile.backend != "cpu":
        time_s = sum(r.time_s for r in rings)
        hidden = 1 - sum(r.exposed_s for r in rings) / time_s if time_s > 0 else 0.0
        remarks.append(f"tensor-parallel permute rings: {hidden * 100:.1f}% of their {time_s * 1e3:.2f} ms per step "
                       "ran beside compute of the same device (hidden), the rest exposed (measured per collective)")
    if profile.backend == "cpu" and rings:
        remarks.append("on the CPU backend a collective-permute is a blocking rendezvous of the device threads: "
                       "how much of a permute ring would hide behind the per-shard matmuls cannot be measured here")
    return Parallelism(axes=axes, mesh_source=source, collectives=collective_rows, roles=roles, pipeline=pipeline,
                       state=state, memory_by_kind=memory_by_kind(profile, module, roles, weights),
                       weight_dims=frozenset(weights), remarks=tuple(remarks), notes=tuple(notes))
