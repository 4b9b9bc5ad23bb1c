"""The train state per device (the axes it is split over and copied over, what FSDP would save) and
the step program's memory at its peak by kind (state, inputs, gathered weights, gradients,
activations, outputs, temporaries)."""

from __future__ import annotations

import dataclasses
from typing import Any, Optional

from ...model import HloModule, Profile
from .mesh import DATA_NAMES, Axis
from .weights import makes_gradients, squeeze, weight_like


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


def state_parameters(module: HloModule) -> frozenset[int]:
    """The entry parameters that hold the train state: those returned updated, and those donated to an
    output (aliased: carried from step to step). Every optimizer leaf counts, also one the step returns
    through a collective (AdamW's moments kept replicated beside sharded parameters are all-gathered
    after their update, so they are not `updated` read from the output alone)."""
    return module.updated_parameters | module.aliased_parameters


def train_state(module: HloModule, axes: list[Axis], roles, spans) -> Optional[State]:
    """The train state per device, the axes it is split over and the ones it is copied over (the
    axes its gradients are all-reduced over: each device there holds the same copy)."""
    updated = state_parameters(module)
    if not updated:
        return None
    total = sum(module.parameter_bytes.get(n, 0) for n in updated)
    copies = [module.parameter_copies.get(n) for n in updated]
    if all(c is not None for c in copies):
        return _state_from_shardings(module, axes, total, updated)
    reduced_over: dict[int, set[tuple[int, ...]]] = {}
    for name, role in roles.items():
        if role == "gradient-sync":
            ins = module.instructions[name]
            for a in spans[name]:
                reduced_over.setdefault(a.stride, set()).update(tuple(sorted(squeeze(d))) for d in ins.operand_dims
                                                                if d)
    replicated, copied = [], 0
    data_axis = ""
    for a in axes:
        shapes = reduced_over.get(a.stride, set())
        bytes_ = sum(module.parameter_bytes.get(n, 0) for n in updated
                     if tuple(sorted(squeeze(module.parameter_dims.get(n, ())))) in shapes)
        if bytes_ >= 0.5 * total and bytes_ > 0:
            replicated.append(a)
            if bytes_ > copied:
                copied, data_axis = bytes_, a.name
    split = [a.name for a in axes if a not in replicated]
    data = next((a for a in axes if a.name == data_axis), None)
    saving = int(copied * (1 - 1 / data.size)) if data else 0
    return State(bytes_per_device=total, split_over=split, replicated_over=[a.name for a in replicated],
                 replicated_bytes=copied, fsdp_saving_bytes=saving, data_axis=data_axis)


def _state_from_shardings(module: HloModule, axes: list[Axis], total: int, updated: frozenset[int]) -> State:
    """The same, read from the state's own shardings in the HLO (the devices holding each leaf's
    copy): exact where the gradients' all-reduces are combined over several axes (SPMD partitioning)."""
    copied: dict[str, int] = {}
    for a in axes:
        along = {k * a.stride for k in range(a.size)}
        copied[a.name] = sum(module.parameter_bytes.get(n, 0) for n in updated
                             if module.parameter_copies[n] == () or along <= set(module.parameter_copies[n]))
    replicated = [a for a in axes if copied[a.name] > 0 and copied[a.name] >= 0.5 * total]
    data = max(replicated, key=lambda a: (copied[a.name], a.name in DATA_NAMES), default=None)
    saving = int(copied[data.name] * (1 - 1 / data.size)) if data else 0
    return State(bytes_per_device=total, split_over=[a.name for a in axes if a not in replicated],
                 replicated_over=[a.name for a in replicated], replicated_bytes=copied[data.name] if data else 0,
                 fsdp_saving_bytes=saving, data_axis=data.name if data else "")


def memory_by_kind(profile: Profile, module: HloModule, roles, weights) -> dict[str, int]:
    """The step program's buffers live at its memory peak (one device), by what they hold."""
    memory = profile.memory
    if memory is None:
        return {}
    training = module.differentiates
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
        elif ins is not None and len(squeeze(dims)) >= 2 and "transpose(" not in ins.op_name:
            kind = "activations"
        else:
            kind = "temporaries"
        out[kind] += b.bytes
    return {k: v for k, v in out.items() if v}
