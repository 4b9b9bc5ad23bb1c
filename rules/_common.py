"""Small helpers the rules share: reading what a profile says about the run."""

from __future__ import annotations

from typing import Optional

from advisor.model import Buffer, Profile
from advisor.model import merge_intervals as merge  # noqa: F401 - the rules' name for it


def bundled_config(profile: Profile) -> Optional[dict]:
    """The resolved config when the trace was recorded by a bundled workload, else None."""
    meta = profile.run_metadata
    return meta.get("config") if meta.get("workload") else None


def workload(profile: Profile) -> Optional[str]:
    return profile.run_metadata.get("workload") or None


def per_step(profile: Profile, total_ns: float) -> float:
    """A total over the profiled window, divided by the number of steps (1 when unknown)."""
    return total_ns / max(len(profile.steps), 1)


def activations(profile: Profile) -> list[Buffer]:
    """Temporaries live at the step's memory peak: mostly what the forward saved for the backward.

    Temporaries shaped like a parameter are gradients or optimizer updates, not activations.
    """
    if profile.memory is None:
        return []
    param_shapes = {b.shape for b in profile.memory.buffers if b.group == "Parameter"}
    return [b for b in profile.memory.buffers if b.group == "Temporary" and b.shape not in param_shapes]


def is_training_step(profile: Profile) -> bool:
    """The step program differentiates something (JAX names backward ops `transpose(...)`)."""
    module = profile.modules.get(profile.step_module or "")
    return bool(module) and any("transpose(" in i.op_name for i in module.instructions.values())


def last_dim(shape: str) -> int:
    inner = shape.rstrip("]").split("[")[-1]
    try:
        return int(inner.split(",")[-1])
    except ValueError:
        return 0


def dims(shape: str) -> tuple[int, ...]:
    inner = shape.rstrip("]").split("[")[-1]
    try:
        return tuple(int(d) for d in inner.split(",") if d)
    except ValueError:
        return ()


def dtype(shape: str) -> str:
    return shape.split("[")[0]


def is_attention_logits(shape: str, min_len: int = 32) -> bool:
    """[..., heads, q, k] with q == k: attention scores or probabilities."""
    d = dims(shape)
    return len(d) >= 4 and d[-1] == d[-2] and d[-1] >= min_len


def kept_by_remat(buffers) -> int:
    """What remat would still keep: the narrowest activations (each block's input)."""
    ranked = [b for b in buffers if len(dims(b.shape)) >= 3]
    if not ranked:
        return 0
    narrowest = min(last_dim(b.shape) for b in ranked)
    return sum(b.bytes for b in ranked if last_dim(b.shape) == narrowest)


def requests_bfloat16(profile: Profile) -> bool:
    """The step program computes something in bfloat16 (it has bf16 instructions)."""
    module = profile.modules.get(profile.step_module or "")
    return bool(module) and any(i.dtype == "bf16" for i in module.instructions.values())


def steps_total_ns(profile: Profile) -> float:
    return sum(s.duration_ns for s in profile.steps)




def layers_in(buffers) -> int:
    """How many layers the activations come from, guessed from their shapes.

    A scan stacks them: most activation bytes share the leading dimension (the layer
    count). Unrolled, each layer has its own buffers: the largest shape repeats per layer.
    """
    big = [b for b in buffers if len(dims(b.shape)) >= 3]
    if not big:
        return 1
    largest = max(big, key=lambda b: b.bytes)
    lead = dims(largest.shape)[0]
    stacked = sum(b.bytes for b in big if dims(b.shape)[0] == lead)
    if lead > 1 and stacked >= 0.5 * sum(b.bytes for b in big) and len(dims(largest.shape)) >= 4:
        return lead
    return max(1, sum(1 for b in big if b.shape == largest.shape))


def source_of(profile: Profile, buffers) -> Optional[str]:
    """The user's source line of the first buffer whose producing instruction the trace attributes."""
    module = profile.modules.get(profile.step_module or "")
    if module is None:
        return None
    for b in buffers:
        ins = module.instructions.get(b.instruction)
        if ins is not None and ins.source is not None:
            return str(ins.source)
    # copies and zero-fills carry no metadata: use an instruction that writes the same shape
    shapes = [b.shape for b in buffers]
    for shape in shapes:
        for ins in module.instructions.values():
            if ins.source is not None and ins.shape == shape:
                return str(ins.source)
    return None
