"""What is live at the step's memory peak, read as a model's arrays (`views.activations.of(profile)`):
the activations (all of them, and those the forward pass saved for the backward pass), the shapes
of the step program's inputs, the dims of weight-shaped arrays, whether the step trains and asks
for bfloat16. Computed once per run; the rules that judge activations (float32-activations,
float32-attention-logits, missing-remat, remat-too-broad, unneeded-grad-accumulation,
unneeded-remat) read them through the functions below.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Optional

from ..model import Buffer, Profile
from . import parallelism
from .bound import cached
from .parallelism.weights import makes_gradients, state_dims, weight_like


@dataclasses.dataclass(frozen=True)
class Activations:
    buffers: tuple[Buffer, ...]         # activation-like temporaries live at the peak, rank 2 or more
    saved: tuple[Buffer, ...]           # of them, what the forward pass saved for the backward pass
    input_shapes: frozenset[str]        # the step program's inputs: parameters, optimizer state, the batch
    weight_dims: frozenset              # dims of weight-shaped arrays on one device
    training: bool                      # the step program differentiates something
    bfloat16: bool                      # the step program computes something in bfloat16
    notes: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"bytes": sum(b.bytes for b in self.buffers), "saved_bytes": sum(b.bytes for b in self.saved),
                "training": self.training, "bfloat16": self.bfloat16}


def of(profile: Profile) -> Activations:
    return cached(profile, "activations", build)


def build(profile: Profile) -> Activations:
    module = profile.modules.get(profile.step_module or "")
    inputs = frozenset(_parameter_shapes(profile))
    weights = _weight_dims(profile)
    training = bool(module) and module.differentiates
    everything, saved = [], []
    for b in profile.memory.buffers if profile.memory is not None else ():
        if b.group != "Temporary" or b.shape in inputs or len(dims(b.shape)) < 2:
            continue
        ins = module.instructions.get(b.instruction) if module else None
        if weight_like(dims(b.shape), weights, makes_gradients(ins, training)):
            continue
        everything.append(b)
        if not (ins is not None and is_backward(ins.op_name)):
            saved.append(b)
    return Activations(buffers=tuple(everything), saved=tuple(saved), input_shapes=inputs, weight_dims=weights,
                       training=training, bfloat16=bool(module) and "bf16" in module.instructions.dtypes())


def activations(profile: Profile, saved_only: bool = False) -> list[Buffer]:
    """Activation-like temporaries live at the step's memory peak, any rank of 2 or more.

    Temporaries shaped like an input are gradients or optimizer updates, not activations; so are
    weight-shaped ones (stage weights sliced from a [1, ...] stack, FSDP-gathered weights, their
    gradients, per-example gradients `[batch, *weight]`).
    `saved_only`: only what the forward pass saved for the backward pass to read (leaving out
    the backward pass's own intermediates, recomputed ones included).
    """
    view = of(profile)
    return list(view.saved if saved_only else view.buffers)


def parameter_shapes(profile: Profile) -> set[str]:
    """Shapes of the step program's inputs: parameters and optimizer state (and the batch)."""
    return set(of(profile).input_shapes)


def weight_dims(profile: Profile) -> frozenset:
    """Dims of weight-shaped arrays on one device: the train state's, their slices (a stage's or a
    layer's weight) and FSDP-gathered copies (the parallelism view's, or the step program's own)."""
    return of(profile).weight_dims


def weight_shaped(profile: Profile, shape: str, weights: Optional[frozenset] = None, gradient: bool = False) -> bool:
    """A buffer shaped like a weight (a stage's slice, a gathered copy), or, for a gradient (made by
    the backward pass), a stack of them (per-example gradients)."""
    return weight_like(dims(shape), weight_dims(profile) if weights is None else weights, gradient)


def is_training_step(profile: Profile) -> bool:
    """The step program differentiates something (JAX names backward ops `transpose(...)`)."""
    return of(profile).training


def requests_bfloat16(profile: Profile) -> bool:
    """The step program computes something in bfloat16 (it has bf16 instructions)."""
    return of(profile).bfloat16


def _parameter_shapes(profile: Profile) -> set[str]:
    shapes = {b.shape for b in profile.memory.buffers if b.group == "Parameter"} if profile.memory else set()
    module = profile.modules.get(profile.step_module or "")
    if module is not None:
        shapes |= {i.shape for i in module.instructions.ops.values()     # main*: the entry, which runs as ops
                   if i.opcode == "parameter" and i.computation.startswith("main")}
    return shapes


def _weight_dims(profile: Profile) -> frozenset:
    view = parallelism.of(profile)
    if view is not None:
        return view.weight_dims
    module = profile.modules.get(profile.step_module or "")
    return frozenset(state_dims(module)) if module is not None else frozenset()


def is_backward(op_name: str) -> bool:
    """JAX names the backward pass's ops `transpose(...)`."""
    return "transpose(" in op_name


def dims(shape: str) -> tuple[int, ...]:
    """The dims of a shape written `f32[4,8,128]`."""
    inner = shape.rstrip("]").split("[")[-1]
    try:
        return tuple(int(d) for d in inner.split(",") if d)
    except ValueError:
        return ()
