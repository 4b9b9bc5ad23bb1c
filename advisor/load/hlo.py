"""Turn a serialized `xla.HloProto` into the profile model's `HloModule`."""

from __future__ import annotations

import math
import re
import sysconfig
from typing import Optional

from ..model import HloModule, Instruction, SourceLine
from .hlo_proto import DTYPES, TUPLE, HloProto

# Frames in these packages are the libraries', not the user's: attribution skips them.
_LIBRARY_PARTS = ("/jax/", "/jaxlib/", "/flax/", "/optax/", "/orbax/", "/chex/", "/importlib/")
_STDLIB = sysconfig.get_paths()["stdlib"]
_REMAT_RE = re.compile(r"(^|/)(checkpoint|remat|rematted_computation)(\b|/|\()")


def is_library_frame(path: str) -> bool:
    return any(part in path for part in _LIBRARY_PARTS) or path.startswith(_STDLIB) or path.startswith("<")


def shape_info(shape) -> tuple[str, tuple[int, ...], int]:
    """(dtype name, dims, bytes) of a ShapeProto; tuples sum their elements."""
    if shape.element_type == TUPLE:
        return "tuple", (), sum(shape_info(s)[2] for s in shape.tuple_shapes)
    name, width = DTYPES.get(shape.element_type, ("other", 0))
    dims = tuple(int(d) for d in shape.dimensions)
    return name, dims, width * math.prod(dims)


class _Frames:
    def __init__(self, index):
        self.index = index

    def user_frame(self, frame_id: int) -> Optional[SourceLine]:
        """Innermost frame of the stack that is in user code."""
        seen = 0
        while 0 < frame_id <= len(self.index.stack_frames) and seen < 200:
            frame = self.index.stack_frames[frame_id - 1]
            loc = self.index.file_locations[frame.file_location_id - 1]
            path = self.index.file_names[loc.file_name_id - 1] if loc.file_name_id else ""
            if path and not is_library_frame(path):
                func = self.index.function_names[loc.function_name_id - 1] if loc.function_name_id else ""
                return SourceLine(path, loc.line, func)
            frame_id = frame.parent_frame_id
            seen += 1
        return None


def parse_module(data: bytes, program_id: int) -> HloModule:
    proto = HloProto()
    proto.ParseFromString(data)
    mod = proto.hlo_module
    comps = {c.id: c for c in mod.computations}
    frames = _Frames(mod.stack_frame_index)

    loop_comps = _loop_computations(comps)
    accumulation = _accumulation_trip_count(comps)
    fused = {cid: frozenset(i.opcode for i in c.instructions) for cid, c in comps.items()}

    instructions: dict[str, Instruction] = {}
    has_remat = False
    for comp in mod.computations:
        for ins in comp.instructions:
            dtype, dims, nbytes = shape_info(ins.shape)
            md = ins.metadata
            source = frames.user_frame(md.stack_frame_id) if md.stack_frame_id else None
            if source is None and md.source_file and not is_library_frame(md.source_file):
                source = SourceLine(md.source_file, md.source_line)
            fused_ops = frozenset()
            if ins.opcode == "fusion":
                fused_ops = frozenset().union(*(fused.get(c, frozenset()) for c in ins.called_computation_ids))
            has_remat = has_remat or bool(_REMAT_RE.search(md.op_name))
            instructions[ins.name] = Instruction(
                name=ins.name, opcode=ins.opcode, computation=comp.name, dtype=dtype, dims=dims,
                bytes=nbytes, op_name=md.op_name, source=source, in_loop_body=comp.id in loop_comps,
                fused_opcodes=fused_ops)

    entry = next((c for c in mod.computations if c.name == mod.entry_computation_name), None)
    params, output_bytes = {}, 0
    if entry is not None:
        for ins in entry.instructions:
            if ins.opcode == "parameter":
                params[int(ins.parameter_number)] = shape_info(ins.shape)[2]
            if ins.id == entry.root_id:
                output_bytes = shape_info(ins.shape)[2]
    aliased = frozenset(int(e.parameter_number) for e in mod.input_output_alias.entries)
    return HloModule(name=mod.name, program_id=program_id, instructions=instructions,
                     aliased_parameters=aliased, parameter_bytes=params, output_bytes=output_bytes,
                     has_remat=has_remat, grad_accumulation_steps=accumulation)


def _loop_computations(comps) -> set[int]:
    """Ids of computations that run inside a while loop, directly or through calls and fusions."""
    calls = {cid: {k for i in c.instructions for k in i.called_computation_ids} for cid, c in comps.items()}
    todo = [k for c in comps.values() for i in c.instructions if i.opcode == "while" for k in i.called_computation_ids]
    inside: set[int] = set()
    while todo:
        cid = todo.pop()
        if cid in inside:
            continue
        inside.add(cid)
        todo.extend(calls.get(cid, ()))
    return inside


def _reachable(comps, roots) -> set[int]:
    calls = {cid: {k for i in c.instructions for k in i.called_computation_ids} for cid, c in comps.items()}
    todo, seen = list(roots), set()
    while todo:
        cid = todo.pop()
        if cid not in seen:
            seen.add(cid)
            todo.extend(calls.get(cid, ()))
    return seen


def _trip_count(ins) -> Optional[int]:
    m = re.search(rb'"known_trip_count":\{"n":"(\d+)"', ins.backend_config)
    return int(m.group(1)) if m else None


def _accumulation_trip_count(comps) -> Optional[int]:
    """Trip count of a while loop, outside differentiation, whose body runs a backward pass.

    JAX names backward ops `transpose(jvp(...))`; a loop that is not itself inside a
    jvp/transpose and contains them computes gradients per iteration: gradient accumulation.
    """
    for comp in comps.values():
        for ins in comp.instructions:
            if ins.opcode != "while" or "jvp(" in ins.metadata.op_name or "transpose(" in ins.metadata.op_name:
                continue
            inside = _reachable(comps, ins.called_computation_ids)
            if any("transpose(" in i.metadata.op_name for cid in inside for i in comps[cid].instructions):
                return _trip_count(ins) or 0
    return None


def split_key(key: str) -> tuple[str, int]:
    """`jit_step(66)` -> ("jit_step", 66)."""
    m = re.fullmatch(r"(.*)\((\d+)\)", key)
    return (m.group(1), int(m.group(2))) if m else (key, -1)
