"""Small helpers the rules share: reading what a profile says about the run."""

from __future__ import annotations

import re
from collections import Counter
from typing import Optional

from advisor.model import Buffer, Profile
from advisor.model import merge_intervals as merge  # noqa: F401 - the rules' name for it
from advisor.views import parallelism
from advisor.views.idle import compiles, warm_up_step  # noqa: F401 - computed with the idle view
from advisor.views.parallelism.weights import makes_gradients, state_dims, weight_like


def bundled_config(profile: Profile) -> Optional[dict]:
    """The resolved config when the trace was recorded by a bundled workload, else None."""
    meta = profile.run_metadata
    return meta.get("config") if meta.get("workload") else None


def workload(profile: Profile) -> Optional[str]:
    return profile.run_metadata.get("workload") or None


# What measures a change's step time on the user's own code (a trace not recorded by a bundled
# workload, whose config run-workload --verify cannot vary): advisor.verify times the step with and
# without the change, advisor check --entry times the pull request against its base branch.
YOUR_CODE_MEASURES = "on your code, advisor.verify(make_step, changes, time=True) or advisor check --entry"


def measured_by(profile: Profile, bundled: str) -> str:
    """Who measures a change's step time: `bundled` (run-workload --verify's words) for a bundled
    workload's run, the user's own tools for the user's trace."""
    return bundled if workload(profile) else YOUR_CODE_MEASURES


def per_step(profile: Profile, total_ns: float) -> float:
    """A total over the profiled window, divided by the number of steps (1 when unknown)."""
    return total_ns / max(len(profile.steps), 1)


def parameter_shapes(profile: Profile) -> set[str]:
    """Shapes of the step program's inputs: parameters and optimizer state (and the batch)."""
    shapes = {b.shape for b in profile.memory.buffers if b.group == "Parameter"} if profile.memory else set()
    module = profile.modules.get(profile.step_module or "")
    if module is not None:
        shapes |= {i.shape for i in module.instructions.ops.values()     # main*: the entry, which runs as ops
                   if i.opcode == "parameter" and i.computation.startswith("main")}
    return shapes


def is_backward(op_name: str) -> bool:
    """JAX names the backward pass's ops `transpose(...)`."""
    return "transpose(" in op_name


def weight_dims(profile: Profile) -> frozenset:
    """Dims of weight-shaped arrays on one device: the train state's, their slices (a stage's or a
    layer's weight) and FSDP-gathered copies (the parallelism view's, or the step program's own)."""
    view = parallelism.of(profile)
    if view is not None:
        return view.weight_dims
    module = profile.modules.get(profile.step_module or "")
    return frozenset(state_dims(module)) if module is not None else frozenset()


def weight_shaped(profile: Profile, shape: str, weights: Optional[frozenset] = None, gradient: bool = False) -> bool:
    """A buffer shaped like a weight (a stage's slice, a gathered copy), or, for a gradient (made by
    the backward pass), a stack of them (per-example gradients)."""
    return weight_like(dims(shape), weight_dims(profile) if weights is None else weights, gradient)


def activations(profile: Profile, saved_only: bool = False) -> list[Buffer]:
    """Activation-like temporaries live at the step's memory peak, any rank of 2 or more.

    Temporaries shaped like an input are gradients or optimizer updates, not activations; so are
    weight-shaped ones (stage weights sliced from a [1, ...] stack, FSDP-gathered weights, their
    gradients, per-example gradients `[batch, *weight]`).
    `saved_only`: only what the forward pass saved for the backward pass to read (leaving out
    the backward pass's own intermediates, recomputed ones included).
    """
    if profile.memory is None:
        return []
    module = profile.modules.get(profile.step_module or "")
    inputs = parameter_shapes(profile)
    weights = weight_dims(profile)
    training = is_training_step(profile)
    out = []
    for b in profile.memory.buffers:
        if b.group != "Temporary" or b.shape in inputs or len(dims(b.shape)) < 2:
            continue
        ins = module.instructions.get(b.instruction) if module else None
        if weight_shaped(profile, b.shape, weights, gradient=makes_gradients(ins, training)):
            continue
        if saved_only and ins is not None and is_backward(ins.op_name):
            continue
        out.append(b)
    return out


def is_training_step(profile: Profile) -> bool:
    """The step program differentiates something (JAX names backward ops `transpose(...)`)."""
    module = profile.modules.get(profile.step_module or "")
    return bool(module) and module.differentiates


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
    """What remat would still keep: the narrowest activations (each block's input). When every
    activation has the same width, the block inputs are not among them (they are shaped like the
    step's input, or not saved apart) and remat keeps none of these."""
    ranked = [b for b in buffers if len(dims(b.shape)) >= 2]
    if not ranked:
        return 0
    narrowest = min(last_dim(b.shape) for b in ranked)
    if all(last_dim(b.shape) == narrowest for b in ranked):
        return 0
    return sum(b.bytes for b in ranked if last_dim(b.shape) == narrowest)


def requests_bfloat16(profile: Profile) -> bool:
    """The step program computes something in bfloat16 (it has bf16 instructions)."""
    module = profile.modules.get(profile.step_module or "")
    return bool(module) and "bf16" in module.instructions.dtypes()


def steps_total_ns(profile: Profile) -> float:
    return sum(s.duration_ns for s in profile.steps)


_INDEXED = re.compile(r"^[A-Za-z][\w.]*?[_.]?\d+$")


def indexed_scopes(profile: Profile, buffers) -> int:
    """Distinct indexed module scopes (`block_0`, `Block_3`, `layers.2`) the buffers were produced in:
    the layer count of an unrolled model, where JAX's op names carry the Flax module path."""
    module = profile.modules.get(profile.step_module or "")
    scopes = set()
    for b in buffers:
        ins = module.instructions.get(b.instruction) if module else None
        if ins is None:
            continue
        for part in ins.op_name.split("/")[1:]:
            if part.startswith(("jvp(", "transpose(", "jit(", "while", "body", "closed_call", "checkpoint")):
                continue
            if _INDEXED.match(part):
                scopes.add(part)
                break
    return len(scopes)


_SCOPE_INDEX = re.compile(r"(?<=[A-Za-z])([_.]?)\d+(?=/|$)")


def layer_groups(profile: Profile, buffers) -> dict[tuple, list]:
    """The buffers grouped by what produced them, layer index left out: the same source line and
    the same op path with its module indices erased (`Block_3/Dense_0/dot_general` and
    `Block_5/Dense_0/dot_general` are one group). In an unrolled model each group holds one buffer
    per layer; pure-JAX and Equinox-style models (no module names) group by source line and op."""
    module = profile.modules.get(profile.step_module or "")
    groups: dict[tuple, list] = {}
    for b in buffers:
        ins = module.instructions.get(b.instruction) if module else None
        if ins is None or ins.source is None:
            continue
        key = (str(ins.source), _SCOPE_INDEX.sub(r"\1#", ins.op_name))
        groups.setdefault(key, []).append(b)
    return groups


def _largest_group(profile: Profile, buffers) -> list:
    groups = layer_groups(profile, buffers)
    if not groups:
        return []
    return max(groups.values(), key=lambda g: (len(g), sum(b.bytes for b in g)))


def _layer_op(ins) -> bool:
    """A matmul or convolution of the entry computation (a layer's own op; library calls on GPUs)."""
    target = ins.custom_call_target.lower()
    return ins.does("dot") or ins.does("convolution") or "gemm" in target or "conv" in target


def heterogeneous_layers(profile: Profile, min_bytes: int = 1 << 20) -> bool:
    """The repeated layers differ in shape (a CNN whose stages change channels and resolution):
    they cannot be stacked into one scan. Read from the forward pass's matmuls and convolutions,
    grouped by source line and op path (module indices erased): the largest group that repeats
    writes buffers of shapes that do not each repeat once per layer."""
    module = profile.modules.get(profile.step_module or "")
    if module is None:
        return False
    groups: dict[tuple, list] = {}
    for ins in module.instructions.ops.values():       # main*: the entry, which runs as ops
        if (ins.source is None or ins.bytes < min_bytes or len(ins.dims) < 2 or is_backward(ins.op_name)
                or not ins.computation.startswith("main") or not _layer_op(ins)):
            continue
        groups.setdefault((str(ins.source), _SCOPE_INDEX.sub(r"\1#", ins.op_name)), []).append(ins)
    repeated = [g for g in groups.values() if len(g) > 1]
    if not repeated:
        return False
    group = max(repeated, key=lambda g: sum(i.bytes for i in g))
    # one line may run several ops per layer (`down(relu(up(x)))`): then each shape repeats once per
    # layer; layers of different shapes write each shape once, or unequal numbers of times
    counts = Counter(i.shape for i in group).values()
    return len(counts) > 1 and (max(counts) == 1 or min(counts) != max(counts))


def layers_in(buffers, scanned: bool = False, profile: Optional[Profile] = None) -> int:
    """How many layers the activations come from.

    A scan stacks them: most activation bytes share the leading dimension (the layer
    count; a rank-4 buffer or a known scan). Unrolled, the op names' indexed module scopes
    (`block_0`, `Block_1`, `layers.2`: Linen's automatic and explicit names) count them where the
    trace has them; else the buffers one source line and op produced once per layer (NNX lists of
    modules, pure-JAX and Equinox-style pytrees of layers, whose op names carry no module path);
    else the largest shape's repeats.
    """
    if not scanned and profile is not None:
        scopes = indexed_scopes(profile, buffers)
        if scopes > 1:
            return scopes
        repeated = len(_largest_group(profile, buffers))
        if repeated > 1:
            return repeated
    big = [b for b in buffers if len(dims(b.shape)) >= 2]
    if not big:
        return 1
    largest = max(big, key=lambda b: b.bytes)
    lead = dims(largest.shape)[0]
    stacked = sum(b.bytes for b in big if dims(b.shape)[0] == lead)
    if lead > 1 and stacked >= 0.5 * sum(b.bytes for b in big) and (scanned or len(dims(largest.shape)) >= 4):
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


def stacking_copies(profile: Profile) -> tuple[list, list]:
    """The step's layer-stacking ops, as (op, instruction) pairs: the `dynamic-update-slice`s inside a
    loop body that write stacked per-iteration buffers (weight-shaped ones left out: stacked weight
    gradients are not activations), and outside the loop the zero-fills (broadcasts) and copies of
    those stacked buffers. Their self time is over the window, summed over the devices that ran them."""
    module = profile.step_module
    ops = [(op, profile.instruction(op)) for op in profile.ops if op.module == module]
    weights = parameter_shapes(profile)   # stacked weight gradients are shaped like the stacked parameters
    dus = [(op, ins) for op, ins in ops if ins and ins.in_loop_body and ins.does("dynamic-update-slice")
           and ins.shape not in weights]
    stacked_shapes = {ins.shape for _, ins in dus}
    fill = [(op, ins) for op, ins in ops
            if ins and not ins.in_loop_body and ins.shape in stacked_shapes
            and (ins.opcode == "copy" or ins.does("broadcast"))]
    return dus, fill
