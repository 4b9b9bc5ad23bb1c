"""The step program's layers (`views.layers.of(profile)`): whether its repeated layers differ in
shape (they cannot be stacked into one scan), and its layer-stacking copies (a scan's
dynamic-update-slices and the fills and copies of what they stack). With `layers_in`, how many
layers some activations come from, and `source_of`, the user's line that made them.
"""
from __future__ import annotations

import dataclasses
import re
from collections import Counter
from typing import Any, Optional

from ..model import Profile
from .activations import dims, is_backward, parameter_shapes
from .bound import cached


@dataclasses.dataclass(frozen=True)
class Layers:
    heterogeneous: bool             # the repeated layers differ in shape (a CNN's stages)
    stacking: tuple                 # (op, instruction) pairs: the loop body's dynamic-update-slices of stacked buffers
    stacking_fill: tuple            # (op, instruction) pairs: outside the loop, the fills and copies of them
    notes: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"heterogeneous": self.heterogeneous, "stacking_ops": len(self.stacking) + len(self.stacking_fill)}


def of(profile: Profile) -> Layers:
    return cached(profile, "layers", build)


def build(profile: Profile) -> Layers:
    dus, fill = _stacking_copies(profile)
    return Layers(heterogeneous=_heterogeneous(profile), stacking=tuple(dus), stacking_fill=tuple(fill))


def heterogeneous_layers(profile: Profile) -> bool:
    """The repeated layers differ in shape (a CNN whose stages change channels and resolution):
    they cannot be stacked into one scan."""
    return of(profile).heterogeneous


def stacking_copies(profile: Profile) -> tuple[list, list]:
    """The step's layer-stacking ops, as (op, instruction) pairs: the `dynamic-update-slice`s inside a
    loop body that write stacked per-iteration buffers (weight-shaped ones left out: stacked weight
    gradients are not activations), and outside the loop the zero-fills (broadcasts) and copies of
    those stacked buffers. Their self time is over the window, summed over the devices that ran them."""
    view = of(profile)
    return list(view.stacking), list(view.stacking_fill)


def _stacking_copies(profile: Profile) -> tuple[list, list]:
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


_INDEXED = re.compile(r"^[A-Za-z][\w.]*?[_.]?\d+$")
_SCOPE_INDEX = re.compile(r"(?<=[A-Za-z])([_.]?)\d+(?=/|$)")


def _layer_op(ins) -> bool:
    """A matmul or convolution of the entry computation (a layer's own op; library calls on GPUs)."""
    target = ins.custom_call_target.lower()
    return ins.does("dot") or ins.does("convolution") or "gemm" in target or "conv" in target


def _heterogeneous(profile: Profile, min_bytes: int = 1 << 20) -> bool:
    """Read from the forward pass's matmuls and convolutions, grouped by source line and op path
    (module indices erased): the largest group that repeats writes buffers of shapes that do not
    each repeat once per layer."""
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
