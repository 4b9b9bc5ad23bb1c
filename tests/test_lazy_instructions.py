"""A module's instructions inside fusions and reducers are built on first need (model.Instructions):
what the reader notes of them without building them must be what building them gives, on real
CPU and GPU traces, and analyzing a GPU trace must not need to build them (the speed it is for)."""

import pickle
import re
from pathlib import Path

import pytest

from advisor.load.hlo import parse_module
from advisor.load.hlo_proto import HloProto
from advisor.load.xspace_slice import metadata_xspace, program_names, program_protos
from advisor.model import HloModule

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
TRACES = ["transformer_scan", "transformer_remat", "transformer_accumulate", "parallel/fsdp",
          "parallel/pmap_data_parallel", "gpu_scan_command_buffers", "h100-traces/transformer_seed",
          "h100-traces/tutorial_notebook_unrolled_h200", "h100-traces/attention_cudnn"]
REMAT = re.compile(r"(^|/)(checkpoint|remat|rematted_computation)(\b|/|\()")


def _largest_programs(trace: str, n: int = 2) -> list[tuple[str, bytes]]:
    xplane = min((FIXTURES / trace).rglob("*.xplane.pb"))
    sliced = metadata_xspace(xplane)
    protos = program_protos(sliced, set(program_names(sliced)))
    return sorted(protos.items(), key=lambda kv: -len(kv[1]))[:n]


PROGRAMS = [pytest.param(data, id=f"{trace}:{key}") for trace in TRACES for key, data in _largest_programs(trace)]


def _proto_names(data: bytes) -> list[str]:
    proto = HloProto()
    proto.ParseFromString(data)
    return [i.name for c in proto.hlo_module.computations for i in c.instructions]


@pytest.mark.parametrize("data", PROGRAMS)
def test_what_is_noted_of_unbuilt_instructions_is_what_building_them_gives(data):
    lazy = parse_module(data, 1)
    instructions = lazy.instructions
    every = parse_module(data, 1).instructions.complete()
    fused = {n: i for n, i in every.items() if n not in instructions.ops}
    assert list(every) == list(dict.fromkeys(_proto_names(data)))      # every one, in the module's order
    assert all(every[name] == ins for name, ins in instructions.ops.items())
    assert list(instructions.op_names()) == [i.op_name for i in every.values()]
    assert instructions.dtypes() == {i.dtype for i in every.values()}
    assert lazy.has_remat == any(REMAT.search(i.op_name) for i in every.values())
    assert lazy.differentiates == any("transpose(" in i.op_name for i in every.values())
    assert instructions.built == (not fused)        # none of that built them
    assert [i.name for i in instructions.collectives()] == [i.name for i in every.values() if i.collective]
    assert instructions.built == (not fused or any(i.collective for i in fused.values()))
    for opcode in ("dynamic-update-slice", "dynamic-slice", "dot", "add"):
        module = parse_module(data, 1)
        assert {i.name for i in module.instructions.in_loops(opcode)} == \
            {i.name for i in every.values() if i.in_loop_body and i.does(opcode)}
        # built only where a fused instruction in a loop is that opcode
        assert module.instructions.built == \
            (not fused or any(i.in_loop_body and i.opcode == opcode for i in fused.values()))


def test_a_fused_instruction_is_built_when_named_and_the_rest_with_it():
    _, data = _largest_programs("h100-traces/tutorial_notebook_unrolled_h200", 1)[0]
    instructions = parse_module(data, 1).instructions
    fused = next(n for n in _proto_names(data) if n not in instructions.ops)
    assert fused in instructions and not instructions.built          # known by name without building
    assert instructions.get("no such instruction") is None and not instructions.built
    ins = instructions[fused]
    assert instructions.built and ins.name == fused and ins.cost is None     # fused: no cost of its own
    assert len(instructions) == len(set(_proto_names(data))) > 10 * len(instructions.ops) // 2


def test_a_module_pickles_whole():
    _, data = _largest_programs("h100-traces/transformer_seed", 1)[0]
    module = parse_module(data, 1)
    copy = pickle.loads(pickle.dumps(module))
    assert copy.instructions.built and dict(copy.instructions) == module.instructions.complete()
    assert copy.instructions.ops.keys() == module.instructions.ops.keys()      # the ops are still the ops


def test_a_plain_dict_of_instructions_is_taken_whole():
    module = HloModule(name="m", program_id=1, instructions={}, aliased_parameters=frozenset(),
                       parameter_bytes={}, output_bytes=0, has_remat=False)
    assert module.instructions.built and list(module.instructions.op_names()) == []


def test_analyzing_a_gpu_trace_builds_no_fused_instruction():
    from advisor.api import analyze
    report = analyze(FIXTURES / "h100-traces" / "tutorial_notebook_unrolled_h200")
    module = next(iter(report.runs[0].profile.modules.values()))
    assert not module.instructions.built and len(module.instructions.ops) < 5000


def _proto(trace: str) -> HloProto:
    proto = HloProto()
    proto.ParseFromString(_largest_programs(trace, 1)[0][1])
    return proto


def test_a_damaged_stack_frame_loses_its_source_not_the_module():
    proto = _proto("h100-traces/transformer_seed")
    mod = proto.hlo_module
    frame = mod.stack_frame_index.stack_frames.add()
    frame.file_location_id = 10**6         # past the end of the index
    fused = next(c for c in mod.computations if c.name != mod.entry_computation_name and c.name.startswith("fused"))
    fused.instructions[0].metadata.stack_frame_id = len(mod.stack_frame_index.stack_frames)
    module = parse_module(proto.SerializeToString(), 1)
    assert module.instructions[fused.instructions[0].name].source is None
    assert pickle.loads(pickle.dumps(module)).instructions.built


def test_a_name_given_twice_holds_the_later_instruction_as_a_dict_would():
    from advisor.load.hlo_cost import ModuleCost

    proto = _proto("h100-traces/transformer_seed")
    mod = proto.hlo_module
    comps = list(mod.computations)
    runs = ModuleCost(mod).runs
    # an instruction that runs as an op, and a fused one after it in the module's order, renamed to it
    i = next(k for k, c in enumerate(comps) if c.id in runs and any(d.id not in runs for d in comps[k + 1:]))
    later = next(c for c in comps[i + 1:] if c.id not in runs)
    name = comps[i].instructions[0].name
    later.instructions[-1].name = name
    instructions = parse_module(proto.SerializeToString(), 1).instructions
    assert instructions.built and instructions[name].computation == later.name
    assert [i.name for i in instructions.values()] == list(dict.fromkeys(_proto_names(proto.SerializeToString())))


def test_without_an_entry_computation_every_instruction_is_built():
    proto = _proto("transformer_scan")
    proto.hlo_module.entry_computation_name = "no such computation"
    instructions = parse_module(proto.SerializeToString(), 1).instructions
    assert instructions.built and len(instructions.ops) == len(set(_proto_names(proto.SerializeToString())))


@pytest.mark.parametrize("trace", ["h100-traces/tutorial_notebook_unrolled_h200", "gpu_scan_command_buffers",
                                   "gpu_remat", "transformer_remat_block", "transformer_accumulate", "parallel/fsdp"])
def test_the_analysis_is_the_same_with_every_instruction_built_first(trace, monkeypatch):
    """The output pins (tests/test_snapshots.py) pickle each profile, which builds every instruction:
    here the rules read the notes of unbuilt ones, against the same run with all of them built."""
    from advisor.engine import analyze_path
    from advisor.job import Job
    from advisor.load import loader

    lazy = analyze_path(FIXTURES / trace, Job(documents=True))
    parse = loader.parse_module

    def built(data, program_id):
        module = parse(data, program_id)
        module.instructions.complete()
        return module

    monkeypatch.setattr(loader, "parse_module", built)
    assert analyze_path(FIXTURES / trace, Job(documents=True)) == lazy
