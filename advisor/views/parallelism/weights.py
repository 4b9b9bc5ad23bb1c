"""What is shaped like a weight: the train state's dims on one device (and their slices: one
stage's, one layer's), and whether a buffer or a collective's operand is such an array or its
gradient. How the parallelism view tells gradient syncs, FSDP gathers and memory kinds apart; the
memory rules read it too."""

from __future__ import annotations

import math
from typing import Optional

from ...model import HloModule, Instruction


def squeeze(dims: tuple[int, ...]) -> tuple[int, ...]:
    i = 0
    while i < len(dims) - 1 and dims[i] == 1:
        i += 1
    return tuple(dims[i:])


def _with_suffixes(dims: tuple[int, ...]) -> set[tuple[int, ...]]:
    """A weight's dims, and for a stack of weights (rank 3 or more: stages, layers) each trailing slice."""
    d = squeeze(dims)
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


def gathered_dims(module: HloModule, roles: dict[str, str]) -> set[tuple[int, ...]]:
    out: set[tuple[int, ...]] = set()
    for name, role in roles.items():
        if role == "fsdp-gather":
            out |= _with_suffixes(module.instructions[name].dims)
    return out


def weight_like(dims: tuple[int, ...], weights, gradient: bool = False) -> bool:
    """Shaped like a weight: a parameter (or a slice of a stacked one, a gathered copy); for a
    gradient (`gradient`: made by the backward pass) also a stack of them with one leading
    dimension more (per-example gradients), whole or flattened per example. A forward buffer
    [batch, *weight] is an activation (e.g. [B, T, D] beside a [T, D] position embedding)."""
    d = squeeze(tuple(dims))
    if len(d) < 2:
        return False
    if d in weights or (gradient and len(d) >= 3 and squeeze(d[1:]) in weights):
        return True
    # per-example gradients flattened per example ([batch, prod(weight)], as a per-example norm reshapes them)
    return gradient and len(d) == 2 and any(len(w) >= 2 and math.prod(w) == d[1] for w in weights)


def is_weight(dims, weights) -> bool:
    """A collective's operand shaped like a weight, in any layout (SPMD partitioning may transpose it)."""
    d = squeeze(tuple(dims))
    return len(d) >= 2 and (d in weights or any(len(w) == len(d) and sorted(w) == sorted(d) for w in weights))


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
