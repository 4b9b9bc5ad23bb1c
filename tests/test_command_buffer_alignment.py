"""The alignment of a command buffer's kernels with its computation's schedule
(advisor/load/command_buffers.py), on small HLO modules built here: each case is one thing the real
traces (tests/test_command_buffers.py) rely on."""

from advisor.load.command_buffers import Schedule, launch
from advisor.load.hlo_proto import HloProto

F32, PRED = 11, 1


def _module(entry: list[tuple[str, str, str]], fused: dict[str, list[str]], while_body: list = ()) -> bytes:
    """An HloProto whose entry computation schedules `entry`'s (name, opcode, custom_call_target) in
    order; each fusion's fused computation has the opcodes `fused[name]` over f32[64] (a while's body
    is `while_body`, scheduled too)."""
    proto = HloProto()
    mod = proto.hlo_module
    mod.name, mod.entry_computation_name = "jit_step", "main"
    ids = iter(range(1, 10_000))

    def computation(name, instructions):
        comp = mod.computations.add()
        comp.name, comp.id = name, next(ids)
        seq = mod.schedule.sequences.add()
        seq.key = comp.id
        for ins_name, opcode, target in instructions:
            ins = comp.instructions.add()
            ins.name, ins.opcode, ins.id = ins_name, opcode, next(ids)
            ins.shape.element_type = F32
            ins.shape.dimensions.append(64)
            ins.custom_call_target = target
            if opcode == "fusion":
                inner = mod.computations.add()
                inner.name, inner.id = f"fused_{ins_name}", next(ids)
                inner.is_fusion_computation = True
                for k, op in enumerate(fused[ins_name]):
                    f = inner.instructions.add()
                    f.name, f.opcode, f.id = f"{op}.{k}", op, next(ids)
                    f.shape.element_type = F32
                    f.shape.dimensions.append(64)
                ins.fusion_kind = "kLoop"
                ins.called_computation_ids.append(inner.id)
            if opcode == "while":
                ins.called_computation_ids.append(computation("body", while_body))
            seq.value.instruction_ids.append(ins.id)
        return comp.id

    computation("main", entry)
    return proto.SerializeToString()


def kernels(*names, memset=(), copy=()):
    return [launch(n, n in memset, n in copy) for n in names]


ADD = ["parameter", "parameter", "add"]
MUL = ["parameter", "multiply"]


def test_names_reuse_memsets_and_library_kernels():
    """An identical fusion runs the first one's kernel; a cuBLAS call's memset goes with it; a copy
    runs as the driver's copy kernel."""
    schedule = Schedule(_module([("loop_add_fusion.1", "fusion", ""), ("loop_add_fusion.2", "fusion", ""),
                                 ("custom-call.3", "custom-call", "__cublas$lt$matmul"), ("copy.4", "copy", ""),
                                 ("loop_multiply_fusion", "fusion", "")],
                                {"loop_add_fusion.1": ADD, "loop_add_fusion.2": ADD, "loop_multiply_fusion": MUL}))
    names, comp = schedule.attribute(kernels("loop_add_fusion_1", "loop_add_fusion_1", "Memset 0",
                                             "nvjet_sm90_tst_128x128", "memcpy32_post", "loop_multiply_fusion",
                                             memset=("Memset 0",)))
    assert comp == "main"
    assert names == ["loop_add_fusion.1", "loop_add_fusion.2", "custom-call.3", "custom-call.3", "copy.4",
                     "loop_multiply_fusion"]


def test_a_launch_never_spans_a_loop():
    """The same kernel name on both sides of a while: a launch of what follows the loop is put there,
    never paired across it."""
    schedule = Schedule(_module([("loop_add_fusion.1", "fusion", ""), ("while.2", "while", ""),
                                 ("loop_add_fusion.3", "fusion", ""), ("loop_multiply_fusion", "fusion", "")],
                                {"loop_add_fusion.1": ADD, "loop_add_fusion.3": ADD, "loop_multiply_fusion": MUL,
                                 "loop_multiply_fusion.9": MUL},
                                while_body=[("loop_multiply_fusion.9", "fusion", "")]))
    names, _ = schedule.attribute(kernels("loop_add_fusion_1", "loop_multiply_fusion"))
    assert names == ["loop_add_fusion.3", "loop_multiply_fusion"]


def test_a_kernel_nothing_matches_stays_unattributed():
    schedule = Schedule(_module([("loop_add_fusion.1", "fusion", "")], {"loop_add_fusion.1": ADD}))
    names, _ = schedule.attribute(kernels("loop_add_fusion_1", "some_kernel_of_a_library"))
    assert names == ["loop_add_fusion.1", None]
