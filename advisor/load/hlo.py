"""Turn a serialized `xla.HloProto` into the profile model's `HloModule`."""

from __future__ import annotations

import functools
import math
import re
import sysconfig
from typing import Optional

from ..model import (
    KERNEL_TARGETS,
    HloModule,
    Instruction,
    Instructions,
    InstructionsRest,
    Loop,
    SourceLine,
    collective_kind,
)
from .element_types import ELEMENT_TYPES, TUPLE
from .hlo_cost import ModuleCost
from .hlo_proto import HloProto
from .kernel_calls import user_kernel

# Frames in these packages are the libraries', not the user's: attribution skips them.
_LIBRARY_PARTS = ("/jax/", "/jaxlib/", "/flax/", "/optax/", "/orbax/", "/chex/", "/importlib/")
_STDLIB = sysconfig.get_paths()["stdlib"]
_REMAT_RE = re.compile(r"(^|/)(checkpoint|remat|rematted_computation)(\b|/|\()")


@functools.lru_cache(maxsize=4096)
def is_library_frame(path: str) -> bool:
    return any(part in path for part in _LIBRARY_PARTS) or path.startswith(_STDLIB) or path.startswith("<")


def shape_info(shape) -> tuple[str, tuple[int, ...], int]:
    """(dtype name, dims, bytes) of a ShapeProto; tuples sum their elements."""
    element_type = shape.element_type
    if element_type == TUPLE:
        return "tuple", (), sum(shape_info(s)[2] for s in shape.tuple_shapes)
    name, bits = ELEMENT_TYPES.get(element_type, ("other", 0))
    dims = tuple(shape.dimensions)
    return name, dims, (bits * math.prod(dims) + 7) // 8    # sub-byte types packed


class _Frames:
    def __init__(self, index):
        self.index = index
        self._seen: dict[int, Optional[SourceLine]] = {}

    def user_frame(self, frame_id: int) -> Optional[SourceLine]:
        """Innermost frame of the stack that is in user code (many instructions share a stack)."""
        if frame_id not in self._seen:
            self._seen[frame_id] = self._user_frame(frame_id)
        return self._seen[frame_id]

    def _user_frame(self, frame_id: int) -> Optional[SourceLine]:
        seen = 0
        index = self.index
        while 0 < frame_id <= len(index.stack_frames) and seen < 200:
            frame = index.stack_frames[frame_id - 1]
            if not 0 < frame.file_location_id <= len(index.file_locations):
                return None     # a damaged index: this stack's source is unknown, the module still read
            loc = index.file_locations[frame.file_location_id - 1]
            path = index.file_names[loc.file_name_id - 1] if 0 < loc.file_name_id <= len(index.file_names) else ""
            if path and not is_library_frame(path):
                func = index.function_names[loc.function_name_id - 1] \
                    if 0 < loc.function_name_id <= len(index.function_names) else ""
                return SourceLine(path, loc.line, func)
            frame_id = frame.parent_frame_id
            seen += 1
        return None


class _Builder:
    """Instructions of the module's computations, a computation at a time."""

    def __init__(self, frames: _Frames, fused, inner_matmul, loop_comps, enclosing):
        self.frames, self.fused, self.inner_matmul = frames, fused, inner_matmul
        self.loop_comps, self.enclosing = loop_comps, enclosing

    def computation(self, comp, out: dict) -> list[Instruction]:
        """Build comp's instructions into out (by name); returns them."""
        frames, fused, inner_matmul = self.frames, self.fused, self.inner_matmul
        by_id = _Lazy(comp)     # operand lookups: only matmuls, collectives and slices need them
        cname, in_loop, loop = comp.name, comp.id in self.loop_comps, self.enclosing.get(comp.id, "")
        built = []
        for ins in comp.instructions:
            opcode, name, shape = ins.opcode, ins.name, ins.shape
            if shape.element_type == TUPLE:
                dtype, dims, nbytes = shape_info(shape)
                if shape.tuple_shapes:      # library calls return (result, workspace): describe the result
                    dtype, dims, _ = shape_info(shape.tuple_shapes[0])
            else:
                dtype, bits = ELEMENT_TYPES.get(shape.element_type, ("other", 0))
                dims = tuple(shape.dimensions)
                nbytes = (bits * math.prod(dims) + 7) // 8    # sub-byte types packed
            md = ins.metadata
            op_name = md.op_name
            frame = md.stack_frame_id
            source = frames.user_frame(frame) if frame else None
            if source is None and md.source_file and not is_library_frame(md.source_file):
                source = SourceLine(md.source_file, md.source_line)
            fused_ops = _NONE
            if opcode == "fusion":
                called = ins.called_computation_ids
                fused_ops = frozenset().union(*(fused.get(c, _NONE) for c in called))
                mm_dtype = next((inner_matmul[c] for c in called if inner_matmul.get(c)), "")
            elif opcode in _COMPUTES_IN_OPERAND_DTYPE:
                mm_dtype = _operand_dtype(by_id, ins)
            else:
                mm_dtype = ""       # not a matmul: no compute precision of its own to record
            collective = bool(collective_kind(opcode))
            instruction = out[name] = Instruction(
                name=name, opcode=opcode, computation=cname, dtype=dtype, dims=dims,
                bytes=nbytes, op_name=op_name, source=source, in_loop_body=in_loop,
                fused_opcodes=fused_ops, custom_call_target=ins.custom_call_target, matmul_dtype=mm_dtype,
                sharded=_sharded(ins) if opcode == "parameter" else None,
                group_size=_group_size(ins) if collective else None,
                operand_bytes=sum(shape_info(by_id[o].shape)[2] for o in ins.operand_ids if o in by_id)
                if collective else 0,
                replica_groups=_replica_groups(ins) if collective else (),
                source_target_pairs=tuple((int(p.source), int(p.target)) for p in ins.source_target_pairs)
                if opcode.startswith("collective-permute") else (),
                operand_dims=_operand_dims(ins, by_id) if collective or "dynamic-slice" in fused_ops
                or opcode == "dynamic-slice" else (),
                loop=loop)
            if opcode == "custom-call" and ins.custom_call_target in KERNEL_TARGETS:
                instruction.kernel, instruction.kernel_dot = user_kernel(ins.custom_call_target, ins.backend_config)
            built.append(instruction)
        return built


def parse_module(data: bytes, program_id: int) -> HloModule:
    proto = HloProto()
    proto.ParseFromString(data)
    mod = proto.hlo_module
    comps = {c.id: c for c in mod.computations}
    calls: dict[int, set[int]] = {}
    fused: dict[int, frozenset[str]] = {}        # computation -> the opcodes in it
    for cid, c in comps.items():
        called, opcodes = set(), set()
        for i in c.instructions:
            opcodes.add(i.opcode)
            called.update(i.called_computation_ids)
        calls[cid], fused[cid] = called, frozenset(opcodes)
    # the while loops, and the computations each one runs (through calls and fusions), found once
    whiles = [(cid, i) for cid, c in comps.items() if "while" in fused[cid]
              for i in c.instructions if i.opcode == "while"]
    reach = [_reachable(calls, ins.called_computation_ids) for _, ins in whiles]
    loop_comps = set().union(*reach)      # every computation that runs inside a loop
    loops, enclosing = _loops(whiles, reach)
    accumulation = _accumulation_trip_count(whiles, reach, comps)
    multisteps = _multisteps_every(comps, mod.stack_frame_index)

    cost = ModuleCost(mod, fused)      # once per program, never per event
    costs, runs, mnk, layout = cost.costs, cost.runs_per_execution(), cost.matmul_dims(), cost.layout_ops()
    inner_matmul = {cid: _matmul_dtype_in(c) for cid, c in comps.items()
                    if "dot" in fused[cid] or "convolution" in fused[cid]}
    build = _Builder(_Frames(mod.stack_frame_index), fused, inner_matmul, loop_comps, enclosing)
    eager = frozenset(cost.runs) or frozenset(comps)     # no entry computation (damaged): all of them now
    ops: dict[str, Instruction] = {}
    rest = []       # inside fusions and reducers: built on first need (Instructions), noted here
    names, op_names, types, tuples = [], [], set(), []
    built = 0
    for comp in mod.computations:
        if comp.id not in eager:
            rest.append(comp)
            for ins in comp.instructions:
                names.append(ins.name)
                op_names.append(ins.metadata.op_name)
                shape = ins.shape
                types.add(shape.element_type)
                if shape.element_type == TUPLE:
                    tuples.append(shape)
            continue
        for instruction in build.computation(comp, ops):
            built += 1
            name = instruction.name
            op_names.append(instruction.op_name)
            c = costs.get(name)
            if c is not None:
                instruction.cost = c
                instruction.runs = runs.get(name)
                instruction.matmul_dims = mnk.get(name, ())
                instruction.changes_layout = name in layout
    dtypes = {ELEMENT_TYPES.get(t, ("other", 0))[0] for t in types - {TUPLE}}
    dtypes |= {shape_info(s.tuple_shapes[0])[0] if s.tuple_shapes else "tuple" for s in tuples}   # as built
    has_remat = any(("remat" in n or "checkpoint" in n) and _REMAT_RE.search(n) for n in op_names)

    # the rest is built from the serialized module when needed (holding its parsed proto costs more)
    everything = functools.partial(_everything, data, eager, ops, fused, inner_matmul, loop_comps, enclosing)
    if not rest:
        instructions = Instructions(ops)
    elif len(set(names) | ops.keys()) < len(names) + built:
        # a name given twice: build all now, and the later instruction holds the name, as in a dict
        instructions = Instructions(ops, every=everything())
    else:
        instructions = Instructions(ops, InstructionsRest(
            everything, frozenset(names), op_names, dtypes,
            any(collective_kind(op) for c in rest for op in fused[c.id]),
            frozenset(op for c in rest if c.id in loop_comps for op in fused[c.id])))

    entry = next((c for c in mod.computations if c.name == mod.entry_computation_name), None)
    params, output_bytes, updated, sharded, param_dims, param_dtypes = {}, 0, frozenset(), {}, {}, {}
    param_names: dict[int, str] = {}
    copies: dict[int, Optional[tuple[int, ...]]] = {}
    if entry is not None:
        for ins in entry.instructions:
            if ins.opcode == "parameter":
                params[int(ins.parameter_number)] = shape_info(ins.shape)[2]
                sharded[int(ins.parameter_number)] = _sharded(ins)
                copies[int(ins.parameter_number)] = _copies(ins)
                param_dims[int(ins.parameter_number)] = shape_info(ins.shape)[1]
                param_dtypes[int(ins.parameter_number)] = shape_info(ins.shape)[0]
                if ins.metadata.op_name:     # JAX names an entry parameter by its argument's path
                    param_names[int(ins.parameter_number)] = ins.metadata.op_name
            if ins.id == entry.root_id:
                output_bytes = shape_info(ins.shape)[2]
        updated = _updated_parameters(entry)
    aliased = frozenset(int(e.parameter_number) for e in mod.input_output_alias.entries)
    return HloModule(name=mod.name, program_id=program_id, instructions=instructions,
                     aliased_parameters=aliased, parameter_bytes=params, output_bytes=output_bytes,
                     has_remat=has_remat, grad_accumulation_steps=accumulation,
                     multisteps_every=multisteps,
                     updated_parameters=updated, parameter_sharded=sharded, parameter_copies=copies,
                     parameter_dims=param_dims, parameter_dtypes=param_dtypes, parameter_names=param_names,
                     loops=loops)


def _everything(data: bytes, eager: frozenset, ops: dict, fused, inner_matmul, loop_comps, enclosing) -> dict:
    """Every instruction of the module, in its order: those built when it was read, the rest now."""
    proto = HloProto()
    proto.ParseFromString(data)
    mod = proto.hlo_module
    build = _Builder(_Frames(mod.stack_frame_index), fused, inner_matmul, loop_comps, enclosing)
    out: dict[str, Instruction] = {}
    for comp in mod.computations:
        if comp.id in eager:
            for ins in comp.instructions:
                out[ins.name] = ops[ins.name]
        else:
            build.computation(comp, out)
    return out


_REPLICATED, _TILED = 0, 3      # xla.OpSharding.Type


def _sharded(ins) -> Optional[bool]:
    """Is this parameter split over devices (True), a full copy on each (False), or unknown (None)?"""
    if not ins.HasField("sharding"):
        return None
    sharding = ins.sharding
    if sharding.type == _REPLICATED:
        return False
    if sharding.type != _TILED:
        return None
    tiles = list(sharding.tile_assignment_dimensions)
    if sharding.replicate_on_last_tile_dim and tiles:
        tiles = tiles[:-1]
    elif sharding.last_tile_dims and tiles:
        tiles = tiles[:len(tiles) - len(sharding.last_tile_dims)]
    return math.prod(tiles) > 1


def _copies(ins) -> Optional[tuple[int, ...]]:
    """The devices that hold the same data as device 0 for this parameter (its copies, itself
    included): all of them when replicated, those along the replicated last tile dimension when
    partly replicated, (0,) when fully split; None when the sharding does not say."""
    if not ins.HasField("sharding"):
        return None
    sharding = ins.sharding
    if sharding.type == _REPLICATED:
        return ()               # every device of the program: the caller knows how many
    tiles = list(sharding.tile_assignment_dimensions)
    if sharding.type != _TILED or not tiles or (sharding.last_tile_dims and not sharding.replicate_on_last_tile_dim):
        return None
    n = math.prod(tiles)
    if sharding.tile_assignment_devices:
        devices = list(sharding.tile_assignment_devices)
    elif sharding.iota_reshape_dims:
        import numpy as np
        order = np.arange(n).reshape(list(sharding.iota_reshape_dims))
        perm = list(sharding.iota_transpose_perm) or list(range(order.ndim))
        devices = order.transpose(perm).reshape(-1).tolist()
    else:
        devices = list(range(n))
    if len(devices) != n or 0 not in devices:
        return None
    if not sharding.replicate_on_last_tile_dim:
        return (0,)
    copies = tiles[-1]
    start = devices.index(0) // copies * copies
    return tuple(sorted(devices[start:start + copies]))


def _group_size(ins) -> Optional[int]:
    """Devices in each replica group of a collective, where the HLO lists them."""
    groups = list(ins.replica_groups)
    if ins.HasField("collective_device_list"):
        listed = ins.collective_device_list
        groups = groups or list(listed.replica_groups)
        if not groups and listed.HasField("iota_replica_group_list"):
            return int(listed.iota_replica_group_list.num_devices_per_group) or None
    if not groups and ins.HasField("iota_device_list"):
        return int(ins.iota_device_list.num_devices_per_group) or None
    return len(groups[0].replica_ids) if groups and groups[0].replica_ids else None


def _replica_groups(ins) -> tuple[tuple[int, ...], ...]:
    """Every replica group of a collective as device ids: listed, or expanded from the iota form
    (iota over the devices, reshaped, transposed, cut into groups)."""
    groups = list(ins.replica_groups)
    if not groups and ins.HasField("collective_device_list"):
        listed = ins.collective_device_list
        groups = list(listed.replica_groups)
        if not groups and listed.HasField("iota_replica_group_list"):
            return _iota_groups(listed.iota_replica_group_list)
    if not groups and ins.HasField("iota_device_list"):     # newer XLA: the iota form in a field of its own
        return _iota_groups(ins.iota_device_list)
    return tuple(tuple(int(r) for r in g.replica_ids) for g in groups)


def _iota_groups(iota) -> tuple[tuple[int, ...], ...]:
    import numpy as np

    count, size = int(iota.num_replica_groups), int(iota.num_devices_per_group)
    dims = [int(d) for d in iota.iota_reshape_dims] or [count * size]
    perm = [int(p) for p in iota.iota_transpose_perm] or list(range(len(dims)))
    if count <= 0 or size <= 0 or math.prod(dims) != count * size or sorted(perm) != list(range(len(dims))):
        return ()
    ids = np.arange(count * size).reshape(dims).transpose(perm).reshape(count, size)
    return tuple(tuple(int(i) for i in row) for row in ids)


def _operand_dims(ins, by_id) -> tuple[tuple[int, ...], ...]:
    out = []
    for o in ins.operand_ids:
        if o in by_id:
            shape = by_id[o].shape
            parts = shape.tuple_shapes if shape.element_type == TUPLE else [shape]
            out.extend(shape_info(s)[1] for s in parts)
    return tuple(out)


def _loops(whiles, reach) -> tuple[dict[str, Loop], dict[int, str]]:
    """The module's while loops ((computation id, instruction) each, and the computations each
    runs), and for each computation the innermost loop whose body (or condition) runs it."""
    enclosing: dict[int, str] = {}
    inner: dict[str, set[int]] = {ins.name: r for (_, ins), r in zip(whiles, reach)}
    # innermost first: a loop reaching fewer computations is nested deeper
    for _, ins in sorted(whiles, key=lambda w: len(inner[w[1].name])):
        for cid in inner[ins.name]:
            enclosing.setdefault(cid, ins.name)
    loops = {}
    for cid, ins in whiles:
        op_name = ins.metadata.op_name
        loops[ins.name] = Loop(name=ins.name, trip_count=_trip_count(ins),
                               backward="transpose(" in op_name, parent=enclosing.get(cid, ""))
    return loops, enclosing


_PASS_THROUGH = ("get-tuple-element", "bitcast", "copy", "reshape")
_NONE: frozenset = frozenset()


class _Lazy:
    """A computation's instructions by id, built on the first lookup."""
    __slots__ = ("_comp", "_by_id")

    def __init__(self, comp):
        self._comp, self._by_id = comp, None

    def _table(self) -> dict:
        if self._by_id is None:
            self._by_id = {i.id: i for i in self._comp.instructions}
        return self._by_id

    def get(self, key, default=None):
        return self._table().get(key, default)

    def __getitem__(self, key):
        return self._table()[key]

    def __contains__(self, key) -> bool:
        return key in self._table()
_COMPUTES_IN_OPERAND_DTYPE = frozenset({"dot", "convolution", "custom-call"})


def _operand_dtype(by_id: dict, ins) -> str:
    """Dtype of the first operand: the precision a dot, convolution or GEMM call computes in."""
    if not ins.operand_ids:
        return ""
    other = by_id.get(ins.operand_ids[0])
    return shape_info(other.shape)[0] if other is not None else ""


def _matmul_dtype_in(comp) -> str:
    for ins in comp.instructions:
        if ins.opcode in ("dot", "convolution"):
            return _operand_dtype({i.id: i for i in comp.instructions}, ins)
    return ""


def _updated_parameters(entry) -> frozenset[int]:
    """Entry parameters the program returns updated: an output computed directly from the
    parameter of the same shape (`new = f(old, ...)`, as an optimizer step does), not merely
    an output of the same shape (a gradient is computed from activations, not from the weight).
    """
    by_id = {i.id: i for i in entry.instructions}
    root = by_id.get(entry.root_id)
    if root is None:
        return frozenset()
    outputs = [by_id[o] for o in root.operand_ids if o in by_id] if root.opcode == "tuple" else [root]
    updated = set()
    for out in outputs:
        shape = shape_info(out.shape)
        for operand_id in out.operand_ids:
            src = by_id.get(operand_id)
            while src is not None and src.opcode in _PASS_THROUGH and src.operand_ids:
                src = by_id.get(src.operand_ids[0])
            if src is not None and src.opcode == "parameter" and shape_info(src.shape) == shape:
                updated.add(int(src.parameter_number))
    return frozenset(updated)


def _reachable(calls, roots) -> set[int]:
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


def _accumulation_trip_count(whiles, reach, comps) -> Optional[int]:
    """Trip count of a while loop, outside differentiation, whose body runs a backward pass.

    JAX names backward ops `transpose(jvp(...))`; a loop that is not itself inside a
    jvp/transpose and contains them computes gradients per iteration: gradient accumulation.
    """
    for (_, ins), inside in zip(whiles, reach):
        if "jvp(" in ins.metadata.op_name or "transpose(" in ins.metadata.op_name:
            continue
        if any("transpose(" in i.metadata.op_name for cid in inside for i in comps[cid].instructions):
            return _trip_count(ins) or 0
    return None


def lacks_heap_simulation(data: bytes) -> bool:
    """The HloProto has a buffer assignment with temporary buffers but no heap simulator traces: XLA's
    assignment of a program loaded from a persistent compilation cache. Its peak (xprof's memory
    viewer walks those traces) would be wrong. A program whose buffers are all parameters, outputs,
    constants or thread-local has no traces when freshly compiled either (`x * 2 + 1`)."""
    from .wire import LEN, VARINT, skip, varint

    def fields(buf, pos, end):
        while pos < end:
            key, pos = varint(buf, pos)
            if key & 7 == LEN:
                length, body = varint(buf, pos)
                yield key >> 3, body, body + length
                pos = body + length
            elif key & 7 == VARINT:
                value, pos = varint(buf, pos)
                yield key >> 3, value, None
            else:
                pos = skip(buf, pos, key & 7)

    try:
        for number, body, end in fields(data, 0, len(data)):
            if number != 3 or end is None:      # HloProto.buffer_assignment
                continue
            parts = list(fields(data, body, end))
            if any(n == 4 for n, _, _ in parts):      # heap_simulator_traces
                return False
            # buffer_allocations = 3: a temporary one is none of an entry parameter (5), a constant (12),
            # thread-local (3) or maybe live out (7)
            return any(not ({f: v for f, v, e in fields(data, b, e2) if e is None}.keys() & _NOT_TEMPORARY)
                       for n, b, e2 in parts if n == 3 and e2 is not None)
    except (ValueError, IndexError):
        return False
    return False


_NOT_TEMPORARY = frozenset({3, 5, 7, 12})


_INT32_MAX = 2**31 - 1


def _multisteps_every(comps, index) -> Optional[int]:
    """optax.MultiSteps in the step: its instructions' stacks pass through `MultiSteps.update`
    (a lax.cond on a mini-step counter, gradients summed into an accumulator in the optimizer
    state). Returns k, the calls per update: the divisor of the counter's `remainder` (0 when the
    HLO does not show it), or None without MultiSteps."""
    functions = list(index.function_names)
    marked = {i + 1 for i, f in enumerate(functions) if f.startswith("MultiSteps.update")}
    if not marked:
        return None
    hit = set()
    for n, frame in enumerate(index.stack_frames, start=1):
        loc = index.file_locations[frame.file_location_id - 1] if 0 < frame.file_location_id <= len(
            index.file_locations) else None
        if loc is not None and loc.function_name_id in marked:
            hit.add(n)
    if not hit:
        return None
    found, every, memo = False, 0, {}
    for comp in comps.values():
        ours = [i for i in comp.instructions if _under(index, i.metadata.stack_frame_id, hit, memo)]
        found = found or bool(ours)
        if any(i.metadata.op_name.endswith("remainder)/rem") or i.opcode == "remainder" for i in ours):
            values = [v for i in comp.instructions if i.opcode == "constant" for v in i.literal.s32s]
            every = max([v for v in values if 1 < v < _INT32_MAX], default=every)
    return every if found else None


def _under(index, frame_id: int, frames: set[int], memo: dict) -> bool:
    """The stack of `frame_id` passes through one of `frames` (memo: answers by frame id)."""
    if frame_id not in memo:
        here, seen, found = frame_id, 0, False
        while 0 < here <= len(index.stack_frames) and seen < 200 and not found:
            found = here in frames
            here = index.stack_frames[here - 1].parent_frame_id
            seen += 1
        memo[frame_id] = found
    return memo[frame_id]


def split_key(key: str) -> tuple[str, int]:
    """`jit_step(66)` -> ("jit_step", 66)."""
    m = re.fullmatch(r"(.*)\((\d+)\)", key)
    return (m.group(1), int(m.group(2))) if m else (key, -1)
