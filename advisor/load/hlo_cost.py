"""FLOPs and bytes of every instruction of an optimized HLO module, counted once per program.

The conventions are XLA's own cost analysis (`HloCostAnalysis`), so the counts can be checked
against jaxlib's `hlo_module_cost_analysis` on the CPU modules (tests/test_hlo_cost.py):

- dot: 2 x (elements of the result) x (size of the contracted dimensions): one multiply and one
  add per multiply-accumulate, batch dimensions included in the result.
- convolution: 2 x batch x output features x input features per group x the kernel taps that
  touch the input (taps over padding are not counted, as XLA does not count them).
- elementwise: one FLOP per result element; exp, log, tanh, logistic, sqrt, rsqrt, power, sin,
  cos, erf, ... are counted apart as transcendentals, as XLA does.
- reduce: (input elements - result elements) x the reducer's FLOPs; reduce-window: result
  elements x (window size - 1) x the reducer's FLOPs.
- fusion: the sum of its fused computation; its bytes are at the fusion's boundary (operands
  read and result written once: what reaches HBM).
- GEMM custom-calls (`__cublas$gemm`, `__cublas$lt$matmul`, hipBLASLt through the same
  targets): as a dot, from the operand shapes and the `gemm_backend_config` dot dimension numbers.
- Fused attention custom-calls (cuDNN's `__cudnn$fmha*`, Transformer Engine's `te_fused_attn_*`):
  from the shapes and mask in their config (advisor/load/attention_cost.py: FlashAttention's
  convention, the backward at 2.5x the forward).
- cuDNN / MIOpen convolution custom-calls (`__cudnn$convForward`, `__cudnn$convBackwardInput`,
  `__cudnn$convBackwardFilter`, `__cudnn$convBiasActivationForward`): from the forward convolution's
  window, dimension numbers and feature groups that XLA keeps on the call (advisor/load/conv_cost.py:
  each pass as the implicit GEMM the library runs, taps over the padding included).
- Other custom-calls (user kernels): FLOPs unknown (`None`); the view reports their share of op time.
- Bytes: operands read plus result written, per instruction (not per fused inner op).

Loops: `runs_per_execution` gives how many times each instruction runs per execution of the
program: the product of the trip counts (`known_trip_count`) of the while loops around it
(None where a trip count is unknown).
"""

from __future__ import annotations

import json
import math
import re
from typing import Optional

from ..model import Cost
from .attention_cost import attention_flops, is_attention_target
from .conv_cost import conv_cost, is_conv_target
from .element_types import ELEMENT_TYPES, TUPLE

TRANSCENDENTAL = frozenset({"exponential", "exponential-minus-one", "log", "log-plus-one", "logistic", "power",
                            "sqrt", "cbrt", "rsqrt", "tanh", "sine", "cosine", "tan", "atan2", "erf"})
ELEMENTWISE = frozenset({
    "abs", "add", "and", "ceil", "clamp", "compare", "complex", "convert", "count-leading-zeros", "divide",
    "floor", "imag", "is-finite", "maximum", "minimum", "multiply", "negate", "not", "or", "popcnt", "real",
    "reduce-precision", "remainder", "round-nearest-afz", "round-nearest-even", "select", "shift-left",
    "shift-right-arithmetic", "shift-right-logical", "sign", "subtract", "xor", "stochastic-convert"}) | TRANSCENDENTAL
# No work and no memory traffic of their own.
FREE = frozenset({"parameter", "constant", "get-tuple-element", "tuple", "bitcast", "after-all", "partition-id",
                  "replica-id", "opt-barrier", "domain", "add-dependency", "while", "call", "conditional",
                  "async-start", "async-update", "async-done", "get-dimension-size", "set-dimension-size"})
# The opcodes that _flops counts (the rest move data, or do nothing).
_COUNTED = ELEMENTWISE | {"dot", "convolution", "reduce", "reduce-window", "scatter", "select-and-scatter", "map"}
# Computations that run as instructions of their own (their instructions are ops on the timeline).
_RUNS_BODY = frozenset({"while", "call", "conditional", "async-start"})
_PASSIVE = frozenset({"parameter", "bitcast", "reshape", "get-tuple-element", "tuple", "constant", "broadcast"})
GEMM_TARGETS = ("__cublas$gemm", "__cublas$lt$matmul", "__cublas$lt$matmul$f8", "__hipblaslt$matmul")
# Custom calls that move or annotate data and compute nothing.
_NO_FLOP_TARGETS = ("Sharding", "SPMDFullToShardShape", "SPMDShardToFullShape", "MoveToHost", "MoveToDevice",
                    "AllocateBuffer", "annotate_device_placement", "LayoutConstraint")


_ZERO = Cost(0.0, 0.0, 0.0)


def _array(shape) -> tuple[int, int]:
    """(elements, bytes) of a shape; tuples sum their elements."""
    if shape.element_type == TUPLE:
        parts = [_array(s) for s in shape.tuple_shapes]
        return sum(p[0] for p in parts), sum(p[1] for p in parts)
    bits = ELEMENT_TYPES.get(shape.element_type, ("other", 0))[1]
    n = math.prod(shape.dimensions)
    return n, (bits * n + 7) // 8


def _elements(shape) -> int:
    return _array(shape)[0]


class ModuleCost:
    """Costs of one module's instructions; build once per program."""

    def __init__(self, module, opcodes: Optional[dict[int, frozenset[str]]] = None):
        """`opcodes`: computation id -> the opcodes in it, where the caller has them (fusions
        without a dot or a transpose are then passed over without reading them)."""
        self.comps = {c.id: c for c in module.computations}
        self._opcodes = opcodes
        self.by_id = {i.id: i for c in module.computations for i in c.instructions}
        self._fused: dict[int, tuple[float, float, bool]] = {}
        entry = next((c for c in module.computations if c.name == module.entry_computation_name), None)
        self.runs = _runs(self.comps, entry.id if entry is not None else None)
        # only the computations that run as instructions: fused and reducer computations are
        # counted in the instruction that applies them
        self.costs: dict[str, Cost] = {ins.name: self.cost(ins) for cid in self.runs
                                       for ins in self.comps[cid].instructions}

    def runs_per_execution(self) -> dict[str, Optional[float]]:
        """Instruction name -> times it runs per program execution (None: a loop's trip count is unknown)."""
        out: dict[str, Optional[float]] = {}
        for cid, times in self.runs.items():
            for ins in self.comps[cid].instructions:
                out[ins.name] = times
        return out

    def layout_ops(self) -> set[str]:
        """Instructions that only move data into another layout: transposes, copies whose result layout
        differs from their operand's, and fusions of nothing else (bitcasts, reshapes aside)."""
        return {ins.name for cid in self.runs for ins in self.comps[cid].instructions if self._is_layout(ins)}

    def _is_layout(self, ins) -> bool:
        if ins.opcode == "transpose":
            return _elements(ins.shape) > 1
        if ins.opcode == "copy":
            src = self.by_id.get(ins.operand_ids[0]) if ins.operand_ids else None
            return src is not None and _elements(ins.shape) > 1 and len(ins.shape.dimensions) > 1 and \
                list(src.shape.layout.minor_to_major) != list(ins.shape.layout.minor_to_major)
        if ins.opcode != "fusion":
            return False
        if not self._holds(ins, ("transpose", "copy")):
            return False
        inner = [i for cid in ins.called_computation_ids for i in (self.comps[cid].instructions if cid in self.comps
                                                                   else ())]
        moving = [i for i in inner if i.opcode not in _PASSIVE]
        return bool(moving) and all(i.opcode in ("transpose", "copy") for i in moving) and \
            any(self._is_layout(i) for i in moving)

    def matmul_dims(self) -> dict[str, tuple[int, int, int, int]]:
        out = {}
        for cid in self.runs:
            for ins in self.comps[cid].instructions:
                dims = self._mnk(ins)
                if dims:
                    out[ins.name] = dims
        return out

    def _holds(self, fusion, opcodes) -> bool:
        """The fusion may hold one of these opcodes (False only where the opcodes are known)."""
        known = self._opcodes
        return known is None or any(op in known.get(cid, opcodes) for cid in fusion.called_computation_ids
                                    for op in opcodes)

    def _mnk(self, ins) -> tuple[int, int, int, int]:
        if ins.opcode == "fusion":
            if not self._holds(ins, ("dot",)):
                return ()
            for cid in ins.called_computation_ids:
                for inner in self.comps[cid].instructions if cid in self.comps else ():
                    if inner.opcode == "dot":
                        return self._mnk(inner)
            return ()
        if ins.opcode == "dot":
            lhs_c = [int(d) for d in ins.dot_dimension_numbers.lhs_contracting_dimensions]
            rhs_c = [int(d) for d in ins.dot_dimension_numbers.rhs_contracting_dimensions]
            lhs_b = [int(d) for d in ins.dot_dimension_numbers.lhs_batch_dimensions]
            rhs_b = [int(d) for d in ins.dot_dimension_numbers.rhs_batch_dimensions]
        elif ins.opcode == "custom-call" and is_gemm_target(ins.custom_call_target):
            lhs_c = gemm_contracting_dims(ins.backend_config)
            if lhs_c is None:
                return ()
            rhs_c = _json_dims(ins.backend_config, "rhs_contracting_dimensions")
            lhs_b = _json_dims(ins.backend_config, "lhs_batch_dimensions") or []
            rhs_b = _json_dims(ins.backend_config, "rhs_batch_dimensions") or []
            if rhs_c is None:
                return ()
        else:
            return ()
        ops = [self.by_id.get(o) for o in ins.operand_ids[:2]]
        if len(ops) < 2 or None in ops:
            return ()
        lhs = [int(d) for d in ops[0].shape.dimensions]
        rhs = [int(d) for d in ops[1].shape.dimensions]
        try:
            batch = math.prod(lhs[d] for d in lhs_b)
            k = math.prod(lhs[d] for d in lhs_c)
            m = math.prod(v for i, v in enumerate(lhs) if i not in lhs_c and i not in lhs_b)
            n = math.prod(v for i, v in enumerate(rhs) if i not in rhs_c and i not in rhs_b)
        except IndexError:
            return ()
        return (batch, m, n, k)

    def operand_bytes(self, ins) -> int:
        return sum(_array(self.by_id[o].shape)[1] for o in ins.operand_ids if o in self.by_id)

    def cost(self, ins) -> Cost:
        op = ins.opcode
        if op in FREE:
            return _ZERO
        out_elems, out_bytes = _array(ins.shape)
        if op == "fusion":
            flops, trans, known = self._computation(ins.called_computation_ids)
            return Cost(flops if known else None, trans, self._fusion_bytes(ins, out_bytes))
        if op == "custom-call":
            return self._custom_call(ins)
        flops, trans = self._flops(ins, out_elems)
        return Cost(flops, trans, self._bytes(ins, out_bytes))

    def _bytes(self, ins, out_bytes: int) -> float:
        op = ins.opcode
        if op == "dynamic-update-slice" and len(ins.operand_ids) > 1:
            update = _array(self.by_id[ins.operand_ids[1]].shape)[1] if ins.operand_ids[1] in self.by_id else 0
            return 2.0 * update         # in place: the update read and written
        if op in ("slice", "dynamic-slice"):
            return 2.0 * out_bytes      # only the slice is read
        return float(self.operand_bytes(ins) + out_bytes)

    def _fusion_bytes(self, ins, out_bytes: int) -> float:
        """Bytes the fusion reads and writes, as XLA's GPU cost model weighs operand utilization: an
        operand the fused ops only slice (slice, dynamic-slice, gather) costs the slices read, the
        buffer an in-place dynamic-update-slice or scatter updates is neither read nor written whole
        (the update is), and every other operand is read once, the result written once."""
        comp = self.comps.get(ins.called_computation_ids[0]) if ins.called_computation_ids else None
        if comp is None or not any(i.opcode in _PARTIAL for i in comp.instructions):
            return float(self.operand_bytes(ins) + out_bytes)      # every operand read whole
        inner = {i.id: i for i in comp.instructions}
        users: dict[int, list] = {}
        for i in comp.instructions:
            for k, o in enumerate(i.operand_ids):
                users.setdefault(o, []).append((i, k))
        root = inner.get(comp.root_id)
        roots = [inner[o] for o in root.operand_ids if o in inner] if root is not None and root.opcode == "tuple" \
            else [root] if root is not None else []
        in_place, written = set(), 0.0
        for r in roots:
            r_bytes = _array(r.shape)[1]
            if r.opcode in ("dynamic-update-slice", "scatter") and len(r.operand_ids) > 1:
                update = inner.get(r.operand_ids[1] if r.opcode == "dynamic-update-slice" else r.operand_ids[-1])
                source = _through_bitcasts(inner, r.operand_ids[0])
                if source is not None and source.opcode == "parameter" and update is not None:
                    in_place.add(source.id)
                    written += _array(update.shape)[1]
                    continue
            written += r_bytes
        if root is not None and root.opcode != "tuple" and not in_place:
            written = float(out_bytes)
        params = {int(i.parameter_number): i for i in comp.instructions if i.opcode == "parameter"}
        read = 0.0
        for k, operand in enumerate(ins.operand_ids):
            size = _array(self.by_id[operand].shape)[1] if operand in self.by_id else 0
            param = params.get(k)
            read += size if param is None else min(size, _param_read(param, users, size, in_place))
        return read + written

    def _computation(self, comp_ids) -> tuple[float, float, bool]:
        """(flops, transcendentals, all known) of fused computations, summed."""
        flops = trans = 0.0
        known = True
        for cid in comp_ids:
            if cid not in self._fused:
                f = t = 0.0
                k = True
                for ins in self.comps[cid].instructions if cid in self.comps else ():
                    op = ins.opcode
                    if op not in _COUNTED and op != "fusion" and op != "custom-call":
                        continue        # moves data or does nothing: most fused instructions
                    if op in ELEMENTWISE:       # inline: half of a module's fused instructions
                        shape = ins.shape
                        n = math.prod(shape.dimensions) if shape.element_type != TUPLE else _elements(shape)
                        fi, ti, ki = (0.0, float(n), True) if op in TRANSCENDENTAL else (float(n), 0.0, True)
                    elif op == "fusion":
                        fi, ti, ki = self._computation(ins.called_computation_ids)
                    elif op == "custom-call":
                        c = self._custom_call(ins)
                        fi, ti, ki = c.flops or 0.0, c.transcendentals, c.flops is not None
                    else:
                        fi, ti = self._flops(ins, _elements(ins.shape))
                        ki = True
                    f, t, k = f + fi, t + ti, k and ki
                self._fused[cid] = (f, t, k)
            f, t, k = self._fused[cid]
            flops, trans, known = flops + f, trans + t, known and k
        return flops, trans, known

    def _reducer_flops(self, ins) -> float:
        if not ins.called_computation_ids:
            return 1.0
        f, t, _ = self._computation(ins.called_computation_ids[:1])
        return max(f + t, 1.0)

    def _flops(self, ins, out_elems: int) -> tuple[float, float]:
        """(flops, transcendentals) of a plain (non-fusion, non-custom-call) instruction."""
        op = ins.opcode
        if op in TRANSCENDENTAL:
            return 0.0, float(out_elems)
        if op in ELEMENTWISE:
            return float(out_elems), 0.0
        if op == "dot":
            return self._dot_flops(ins, out_elems), 0.0
        if op == "convolution":
            return self._conv_flops(ins), 0.0
        if op == "reduce":
            n_in = len(ins.operand_ids) // 2 or 1
            inputs = sum(_elements(self.by_id[o].shape) for o in ins.operand_ids[:n_in] if o in self.by_id)
            outputs = out_elems
            return max(inputs - outputs, 0) / n_in * self._reducer_flops(ins), 0.0
        if op == "reduce-window":
            window = math.prod(max(int(d.size), 1) for d in ins.window.dimensions) if ins.HasField("window") else 1
            return float(out_elems * (window - 1) * self._reducer_flops(ins)), 0.0
        if op in ("scatter", "select-and-scatter"):
            updates = _elements(self.by_id[ins.operand_ids[-1]].shape) if ins.operand_ids and \
                ins.operand_ids[-1] in self.by_id else 0
            return float(updates * self._reducer_flops(ins)), 0.0
        if op == "map":
            return float(out_elems * self._reducer_flops(ins)), 0.0
        return 0.0, 0.0     # data movement: copy, transpose, broadcast, slice, gather, collectives, ...

    def _dot_flops(self, ins, out_elems: int) -> float:
        lhs = self.by_id.get(ins.operand_ids[0]) if ins.operand_ids else None
        if lhs is None:
            return 0.0
        dims = [int(d) for d in lhs.shape.dimensions]
        k = math.prod(dims[int(c)] for c in ins.dot_dimension_numbers.lhs_contracting_dimensions if int(c) < len(dims))
        return 2.0 * out_elems * k

    def _conv_flops(self, ins) -> float:
        if len(ins.operand_ids) < 2 or any(o not in self.by_id for o in ins.operand_ids[:2]):
            return 0.0
        x = [int(d) for d in self.by_id[ins.operand_ids[0]].shape.dimensions]
        w = [int(d) for d in self.by_id[ins.operand_ids[1]].shape.dimensions]
        out = [int(d) for d in ins.shape.dimensions] if ins.shape.element_type != TUPLE else \
            [int(d) for d in ins.shape.tuple_shapes[0].dimensions]
        dn = ins.convolution_dimension_numbers
        groups = max(int(ins.feature_group_count), 1)
        batch_groups = max(int(ins.batch_group_count), 1)
        taps = 1
        for i, (xd, wd, od) in enumerate(zip(dn.input_spatial_dimensions, dn.kernel_spatial_dimensions,
                                             dn.output_spatial_dimensions)):
            wdim = ins.window.dimensions[i] if i < len(ins.window.dimensions) else None
            taps *= _valid_taps(x[xd], w[wd], out[od], wdim)
        in_features = x[dn.input_feature_dimension] // groups
        return 2.0 * (x[dn.input_batch_dimension] // batch_groups) * out[dn.output_feature_dimension] \
            * in_features * taps

    def _custom_call(self, ins) -> Cost:
        target = ins.custom_call_target
        result = ins.shape.tuple_shapes[0] if ins.shape.element_type == TUPLE and ins.shape.tuple_shapes else ins.shape
        out_elems, out_bytes = _array(result)
        nbytes = float(self.operand_bytes(ins) + out_bytes)
        if target in _NO_FLOP_TARGETS:
            return Cost(0.0, 0.0, nbytes)
        if is_attention_target(target):
            dims = [[int(d) for d in self.by_id[o].shape.dimensions] for o in ins.operand_ids if o in self.by_id]
            return Cost(attention_flops(target, ins.backend_config, dims), 0.0, nbytes)
        if is_conv_target(target):
            dims = [[int(d) for d in self.by_id[o].shape.dimensions] if o in self.by_id else None
                    for o in ins.operand_ids]
            counted = conv_cost(ins, dims, [int(d) for d in result.dimensions])
            return Cost(counted[0], counted[1], nbytes) if counted else Cost(None, 0.0, nbytes)
        if not is_gemm_target(target):
            return Cost(None, 0.0, nbytes)
        k = self._gemm_k(ins, out_elems)
        return Cost(2.0 * out_elems * k if k else None, 0.0, nbytes)

    def _gemm_k(self, ins, out_elems: int) -> Optional[int]:
        """The contracted size of a GEMM call: from the backend config's dot dimension numbers, else
        (two rank-2 operands) from the shapes alone."""
        shapes = [self.by_id[o].shape for o in ins.operand_ids[:2] if o in self.by_id]
        if not shapes:
            return None
        lhs = [int(d) for d in shapes[0].dimensions]
        dims = gemm_contracting_dims(ins.backend_config)
        if dims is not None:
            return math.prod(lhs[d] for d in dims if d < len(lhs))
        if len(shapes) == 2 and len(lhs) == 2 and len(shapes[1].dimensions) == 2 and out_elems:
            rhs = [int(d) for d in shapes[1].dimensions]
            k = math.isqrt(math.prod(lhs) * math.prod(rhs) // out_elems)
            return k if k in lhs and k in rhs else None
        return None


_VIEWS = ("bitcast", "reshape")          # a parameter seen through these is still the parameter
_PARTIAL = frozenset({"slice", "dynamic-slice", "gather", "dynamic-update-slice", "scatter"})   # touch part of a buffer
_SLICING = ("slice", "dynamic-slice", "gather")


def _through_bitcasts(inner: dict, iid: int):
    """The instruction `iid` is a view of (the parameter behind a chain of bitcasts)."""
    ins = inner.get(iid)
    while ins is not None and ins.opcode in _VIEWS and ins.operand_ids:
        ins = inner.get(ins.operand_ids[0])
    return ins


def _param_read(param, users: dict, size: int, in_place: set) -> float:
    """Bytes of a fusion parameter that its fused ops read: the slices taken of it when slicing is
    all they do with it, nothing when it is only the buffer updated in place, else all of it."""
    uses, todo = [], [param]
    while todo:
        node = todo.pop()
        for user, k in users.get(node.id, ()):
            if user.opcode in _VIEWS:
                todo.append(user)
            else:
                uses.append((user, k))
    if not uses:
        return 0.0
    if param.id in in_place and all(u.opcode in ("dynamic-update-slice", "scatter") and k == 0 for u, k in uses):
        return 0.0
    if all(u.opcode in _SLICING and k == 0 for u, k in uses):
        return float(sum(_array(u.shape)[1] for u, _ in uses))
    return float(size)


def is_gemm_target(target: str) -> bool:
    return target in GEMM_TARGETS or (target.startswith("__cublas") and "matmul" in target) \
        or "hipblas" in target.lower()


_CONTRACTING = re.compile(rb'"lhs_contracting_dimensions"\s*:\s*\[([^\]]*)\]')


def gemm_contracting_dims(backend_config: bytes) -> Optional[list[int]]:
    """The lhs contracting dimensions named in a GEMM's backend config (JSON), or None."""
    if not backend_config:
        return None
    try:
        cfg = json.loads(backend_config)
        dot = (cfg.get("gemm_backend_config") or cfg).get("dot_dimension_numbers") or {}
        dims = dot.get("lhs_contracting_dimensions")
        return [int(d) for d in dims] if dims is not None else None
    except (ValueError, AttributeError, TypeError):
        m = _CONTRACTING.search(backend_config)
        return [int(d) for d in re.findall(rb"\d+", m.group(1))] if m else None


def _json_dims(backend_config: bytes, key: str) -> Optional[list[int]]:
    try:
        cfg = json.loads(backend_config)
        dims = ((cfg.get("gemm_backend_config") or cfg).get("dot_dimension_numbers") or {}).get(key)
        return [int(d) for d in dims] if dims is not None else None
    except (ValueError, AttributeError, TypeError):
        return None


def _valid_taps(in_size: int, k_size: int, out_size: int, wdim) -> int:
    """(output position, kernel position) pairs whose input position is inside the input, not in
    its padding (XLA's count for one spatial dimension)."""
    stride = max(int(wdim.stride), 1) if wdim is not None else 1
    pad_lo = int(wdim.padding_low) if wdim is not None else 0
    w_dil = max(int(wdim.window_dilation), 1) if wdim is not None else 1
    b_dil = max(int(wdim.base_dilation), 1) if wdim is not None else 1
    dilated_in = (in_size - 1) * b_dil + 1
    count = 0
    for k in range(k_size):
        offset = k * w_dil - pad_lo
        for o in range(out_size):
            pos = o * stride + offset
            if 0 <= pos < dilated_in and pos % b_dil == 0:
                count += 1
    return count


def _trip_count(ins) -> Optional[int]:
    m = re.search(rb'"known_trip_count":\{"n":"(\d+)"', ins.backend_config)
    return int(m.group(1)) if m else None


def _runs(comps, entry_id) -> dict[int, Optional[float]]:
    """Computation id -> runs per program execution, for the computations that run as instructions
    (the entry, loop bodies and conditions, called and branch computations)."""
    out: dict[int, Optional[float]] = {}
    if entry_id is None:
        return out
    todo: list[tuple[int, Optional[float]]] = [(entry_id, 1.0)]
    while todo:
        cid, times = todo.pop()
        if cid in out or cid not in comps:
            continue
        out[cid] = times
        for ins in comps[cid].instructions:
            if ins.opcode not in _RUNS_BODY:
                continue
            inner = times
            if ins.opcode == "while":
                trips = _trip_count(ins)
                inner = times * trips if times is not None and trips is not None else None
            for called in ins.called_computation_ids:
                todo.append((called, inner))
    return out


def module_cost(module) -> tuple[dict[str, Cost], dict[str, Optional[float]], dict[str, tuple[int, int, int, int]],
                                 set[str]]:
    """(cost of each instruction per execution, runs of each instruction per program execution,
    (batch, M, N, K) of each matmul: dots, GEMM calls, fusions around a dot, the instructions that only
    change a layout) of an `HloModuleProto`; fused computations' instructions are counted in their fusion."""
    mc = ModuleCost(module)
    return mc.costs, mc.runs_per_execution(), mc.matmul_dims(), mc.layout_ops()
