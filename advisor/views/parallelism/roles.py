"""What each collective does (its role): gradient sync, FSDP gather or scatter, pipeline transfer,
tensor-parallel, other; judged from its operands' shapes and loops, then from the mesh's names
where the mesh is named, and the inferred axes named by what runs over them."""

from __future__ import annotations

from ...model import HloModule, Instruction
from .mesh import MODEL_NAMES, Axis
from .weights import is_weight, squeeze

ROLES = ("gradient-sync", "fsdp-gather", "fsdp-scatter", "pipeline-transfer", "tensor-parallel", "other")


def role(ins: Instruction, module: HloModule, weights, schedule: set[str]) -> str:
    kind = ins.collective
    operands = [d for d in ins.operand_dims if d] or [ins.dims]
    if kind == "collective-permute":
        if any(module.in_loop(ins.loop, loop) for loop in schedule):
            return "pipeline-transfer"
        return "tensor-parallel" if len(squeeze(operands[0])) >= 2 else "other"
    if kind == "all-gather" and any(is_weight(d, weights) for d in operands):
        return "fsdp-gather"
    if kind == "reduce-scatter" and is_weight(ins.dims, weights):
        return "fsdp-scatter"
    if kind == "all-reduce" and any(is_weight(d, weights) for d in operands):
        return "gradient-sync"
    if kind in ("all-gather", "reduce-scatter", "all-reduce", "all-to-all") and any(len(squeeze(d)) >= 2
                                                                                   for d in operands):
        return "tensor-parallel"
    return "other"


def roles_from_names(roles: dict[str, str], spans: dict[str, list]) -> dict[str, str]:
    """With the mesh's names known: an all-reduce over the model (tensor) axis alone reduces
    activations, whatever its shape resembles; weight-shaped all-reduces over the data axes only are
    gradients."""
    out = {}
    for name, role in roles.items():
        axes = {a.name.lower() for a in spans[name]}
        if role == "gradient-sync" and axes and axes <= set(MODEL_NAMES):
            role = "tensor-parallel"
        out[name] = role
    return out


def data_collectives_are_resharding(roles: dict[str, str], spans: dict[str, list],
                                     rings: set[int] = frozenset()) -> dict[str, str]:
    """Activation collectives over an axis the gradients are reduced (or FSDP-gathered) over are the
    SPMD partitioner's resharding there, not tensor parallelism: `other` (not over an axis that
    carries tensor-parallel rings)."""
    data = {spans[name][0].stride for name, role in roles.items()
            if role in ("gradient-sync", "fsdp-gather", "fsdp-scatter") and len(spans[name]) == 1} - set(rings)
    return {name: "other" if role == "tensor-parallel" and any(a.stride in data for a in spans[name]) else role
            for name, role in roles.items()}


def name_axes(axes: list[Axis], roles: dict[str, str], spans: dict[str, list[Axis]]) -> list[Axis]:
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
