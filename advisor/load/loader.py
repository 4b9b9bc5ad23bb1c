"""Load one traced host into the profile model."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Callable, Mapping, Optional, Sequence

from ..categories import categorize
from ..errors import AdvisorError
from ..locate import RunFiles, host_name
from ..model import Buffer, HloModule, Host, MemoryAtPeak, Profile, merge_intervals, overlap_ns
from ..safe_json import load_side_json
from .device_totals import device_totals
from .hlo import lacks_heap_simulation, parse_module, split_key
from .memprof import read_memory_profile
from .timeline import StepWindowError, Timeline, read_timeline
from .xplane_stream import StreamSpace, XSpaceError
from .xprof_tools import start_xprof
from .xspace_slice import metadata_xspace, program_protos

_MIB = 1024 * 1024

# {a part of the trace (a key of advisor.rule.NEEDS: "hlo", "buffers", ...): the ids of the rules that
# read it}, as the job gives them (Rule.needs): named when that part is unreadable. The loader knows no rule.
Readers = Mapping[str, Sequence[str]]


def _could_not_run(readers: Optional[Readers], need: str, part: str) -> str:
    names = (readers or {}).get(need)
    return f"{', '.join(names)} could not run" if names else f"the rules that read {part} could not run"


def load_profile_data(path):
    """The file's XSpace, read as a stream (`ADVISOR_READER=profiledata`: with
    `jax.profiler.ProfileData`, the reader the stream reader is tested against), or one clear
    error if it is not an XSpace."""
    try:
        if os.environ.get("ADVISOR_READER") == "profiledata":
            from jax.profiler import ProfileData
            return ProfileData.from_file(str(path))
        return StreamSpace(path)
    except Exception as err:  # noqa: BLE001 - the C++ parser raises plain RuntimeErrors/ValueErrors
        raise _unreadable(path, err) from None


def load_timeline(path, steps: Optional[slice] = None, protos=None) -> Timeline:
    """The timeline of the file (of the steps numbered in the `steps` slice, if given); a part found
    corrupt while streaming is the same clear error. `protos(keys)` gives programs' HLO by key (to
    attribute the kernels of command buffers); by default they are read from the file's own
    metadata plane when a command buffer needs them."""
    if os.path.getsize(path) == 0:     # an empty XSpace parses: it would read as a run where nothing ran
        raise AdvisorError(f"{path}: the file is empty (0 bytes), not a trace: record the trace again")
    profile_data = load_profile_data(path)
    if protos is None:
        protos = _file_protos(path)
    try:
        return read_timeline(profile_data, steps, protos)
    except XSpaceError as err:
        raise _unreadable(path, err) from None
    except StepWindowError as err:
        raise AdvisorError(f"{path}: {err}") from None


def _file_protos(path) -> Callable[[set[str]], dict[str, bytes]]:
    """The programs' HLO read from the file's metadata plane, sliced once on first use."""
    sliced: list[bytes] = []

    def protos(keys: set[str]) -> dict[str, bytes]:
        if not sliced:
            sliced.append(metadata_xspace(Path(path)))
        return program_protos(sliced[0], keys)
    return protos


def _unreadable(path, err: Exception) -> AdvisorError:
    return AdvisorError(f"{path}: cannot parse this .xplane.pb ({_first_line(err)}); "
                        "it may be truncated or corrupt: record the trace again")


def _first_line(err: Exception) -> str:
    text = str(err).strip().splitlines()
    return text[0][:160] if text else type(err).__name__


def load_run(run: RunFiles, steps: Optional[slice] = None, readers: Optional[Readers] = None) -> Profile:
    """The run: its first host file read in full, its other host files reduced and merged in (the
    Ray engine calls the same three steps, each host file in a task of its own); with `steps`, of
    the steps whose numbers are in that slice only; `readers` names the rules a part that cannot be
    read stops."""
    first = load_first_host(run, steps, readers)
    reference = HostReference.of(first)
    return merge_hosts(first, [load_host(path, lambda: reference, steps) for path in run.host_files[1:]])


def load_first_host(run: RunFiles, steps: Optional[slice] = None, readers: Optional[Readers] = None) -> Profile:
    """The run's first host file read in full (its HLO describes the program every host runs), with
    the run's metadata and memory profile: the run's profile before its other hosts are merged in."""
    pending = start_xprof(run.xplane)      # its child runs beside the timeline's reading
    try:
        timeline = load_timeline(run.xplane, steps, pending.protos if pending.names is not None else None)
        warnings: list[str] = []
        meta = _run_metadata(run, warnings)
        step_module = timeline.step_module
    except BaseException:
        pending.cancel()
        raise
    ran = {op.module for op in timeline.ops}
    aliases = cached_program_aliases(pending.names, ran, timeline.ops, pending.protos)
    try:
        pending.ask(aliases.get(step_module, step_module))     # the memory viewer runs while the HLO is parsed
        sliced = pending.all_protos()
        modules = (_modules(_renamed(sliced, aliases), warnings, step_module, ran, readers)
                   if sliced is not None else None)
    except BaseException:
        pending.cancel()
        raise
    xprof = pending.finish()
    protos = _renamed(dict(xprof.hlo_protos), aliases)
    if modules is None:
        modules = _modules(protos, warnings, step_module, ran, readers)
    cache_notes = [f"the HLO of {key} is registered as {registered} in the trace (a program loaded from a "
                   "persistent compilation cache gets a new id there): read from there"
                   for key, registered in sorted(aliases.items())]
    unsimulated = step_module in modules and lacks_heap_simulation(protos[step_module])
    memory = _memory_at_peak(xprof.memory_viewer, step_module) if step_module in modules and not unsimulated else None
    if unsimulated:
        warnings.append(f"the buffer assignment of {step_module} carries no heap simulation (the program was "
                        "loaded from a persistent compilation cache): peak memory is unknown and "
                        f"{_could_not_run(readers, 'buffers', 'the buffers')}; record the trace with the cache off")
    held = len(sliced if sliced is not None else protos)     # the programs' HLO read from the trace
    if xprof.programs is not None and held < xprof.programs:
        lost = xprof.programs - held
        warnings.append(f"the HLO of {lost} of the {xprof.programs} programs in the trace could not be read")
    if xprof.error:
        warnings.append(f"{xprof.error}; the HLO and buffers read before it stopped are used")
    if step_module in modules and memory is None and not unsimulated:
        warnings.append(f"the buffer assignment (memory viewer) of {step_module} could not be read: "
                        f"{_could_not_run(readers, 'buffers', 'the buffers')}, and peak memory is unknown")

    backend = timeline.backend
    device_name = timeline.device_name or meta.get("device_kind", "") or backend
    _categorize_devices(timeline, modules)
    if not timeline.ops:
        what = ("no XLA op started in the steps asked" if timeline.step_window is not None
                else "no XLA op ran while it was recorded")
        warnings.append(f"the trace holds no executed ops ({what}): no rule could run; record the trace "
                        "around steps that run on the device")
    memory_profile = []
    if run.memory_profile:
        try:
            memory_profile = read_memory_profile(run.memory_profile)
        except AdvisorError as err:
            warnings.append(f"{err}: its live-at-save table is left out")
    step_peak = memory.peak_bytes if memory else None
    hosts = [Host(name=host_name(run.xplane), path=str(run.xplane), steps=timeline.steps,
                  devices=device_totals(host_name(run.xplane), timeline.device_ops,
                                        timeline.steps, modules, step_peak, timeline.allocators),
                  compile_in_steps_ns=_compile_in_steps(timeline))]
    return Profile(
        path=str(run.xplane),
        backend=backend,
        device_name=device_name,
        steps=timeline.steps,
        ops=timeline.ops,
        modules=modules,
        step_module=step_module,
        memory=memory,
        device_memory_profile=memory_profile,
        run_metadata=meta,
        trace_versions={k: v for k, v in timeline.host_stats.items()
                        if isinstance(k, str) and k.endswith("_version") and isinstance(v, str)},
        device_capacity_bytes=_capacity(timeline.device_stats),
        notes=_window_note(timeline) + cache_notes + _graph_notes(timeline),
        warnings=warnings,
        busy=timeline.busy,
        host_events=timeline.host_events,
        transfers=timeline.transfers,
        devices=timeline.devices,
        allocators=timeline.allocators,
        hosts=hosts,
    )


def _renamed(protos: dict[str, bytes], aliases: dict[str, str]) -> dict[str, bytes]:
    """The HLO by the key the program's ops carry (a cached program's is registered under another)."""
    for key, registered in aliases.items():
        if registered in protos:
            protos[key] = protos.pop(registered)
    return protos


def cached_program_aliases(registered: Optional[list[str]], ran: set[str], ops=(),
                           protos: Callable[[set[str]], dict[str, bytes]] = lambda keys: {}) -> dict[str, str]:
    """{program its ops name: the key its HLO is registered under}, for the programs that ran without
    HLO under their own key. A program loaded from JAX's persistent compilation cache runs under the
    id it was compiled with, but the profiler registers its HLO under a new one: it is the program of
    the same name that no op names, or among several such, the one whose instructions are every op
    that ran under the missing key. Anything less certain: none is guessed."""
    if not registered:
        return {}
    have = set(registered)
    missing: dict[str, list[str]] = {}
    for key in ran:
        name, program_id = split_key(key)
        if program_id >= 0 and key not in have:
            missing.setdefault(name, []).append(key)
    out = {}
    for name, keys in missing.items():
        spare = [r for r in registered if split_key(r)[0] == name and r not in ran]
        if len(keys) != 1 or not spare:
            continue
        if len(spare) > 1:
            ran_ops = {op.name for op in ops if op.module == keys[0]}
            spare = [key for key, data in protos(set(spare)).items() if ran_ops and ran_ops <= _instruction_names(data)]
        if len(spare) == 1:
            out[keys[0]] = spare[0]
    return out


def _instruction_names(data: bytes) -> set[str]:
    from .hlo_proto import HloProto

    proto = HloProto()
    try:
        proto.ParseFromString(data)
    except Exception:  # noqa: BLE001 - an unreadable candidate is no match
        return set()
    return {i.name for c in proto.hlo_module.computations for i in c.instructions}


SAME_PROGRAM_SHARE = 0.9     # a host runs the first host's program when this share of its ops are its instructions


@dataclasses.dataclass(frozen=True)
class HostReference:
    """What a run's other hosts are lined up with and reduced by: the first host's step program, step
    numbers, HLO and step peak (what a Ray task reading another host needs of the first host)."""
    name: str
    step_module: Optional[str]
    step_numbers: frozenset[int]
    modules: dict[str, HloModule]
    step_peak: Optional[int]

    @classmethod
    def of(cls, first: Profile) -> "HostReference":
        return cls(name=first.hosts[0].name, step_module=first.step_module,
                   step_numbers=frozenset(s.number for s in first.steps), modules=first.modules,
                   step_peak=first.memory.peak_bytes if first.memory else None)


@dataclasses.dataclass
class HostPart:
    """Another host file reduced: its Host (None when it was skipped) and the warnings it adds to the run."""
    host: Optional[Host]
    warnings: list[str]


def _window_note(timeline: Timeline) -> list[str]:
    if timeline.step_window is None:
        return []
    first, last = timeline.step_window
    return [f"steps {first} to {last} analyzed ({len(timeline.steps)} of the trace's {timeline.steps_of_trace} "
            "steps, as --steps asked): every figure is over these steps"]


def load_host(path: Path, reference: Callable[[], Optional[HostReference]],
              steps: Optional[slice] = None) -> Optional[HostPart]:
    """Another host file of a run: its timeline only (the first host's HLO describes the program they all
    run), lined up with the first by step number, never by timestamps (each host has its own clock). A
    host that cannot be read, or that ran another program, is skipped with one line. `reference` is asked
    for once the file is read, so that a Ray task reads its host while the first host is still being read;
    None there (the first host could not be read: the run fails) gives None."""
    name = host_name(path)
    try:
        timeline = load_timeline(path, steps)
    except AdvisorError as err:
        return HostPart(None, [f"host {name} skipped: {err}"])
    first = reference()
    if first is None:
        return None
    if first.step_module and timeline.step_module and \
            split_key(timeline.step_module)[0] != split_key(first.step_module)[0]:
        return HostPart(None, [f"host {name} skipped: it ran {timeline.step_module}, not {first.step_module}"])
    step_module = first.modules.get(first.step_module or "")
    ran = {op.name for op in timeline.ops if op.module == timeline.step_module}
    if step_module is not None and ran and \
            len(ran & step_module.instructions.keys()) < SAME_PROGRAM_SHARE * len(ran):
        return HostPart(None, [f"host {name} skipped: its step program {timeline.step_module} is not "
                               f"{first.step_module}'s (its ops are not that program's instructions)"])
    warnings = []
    theirs = {s.number for s in timeline.steps}
    if theirs != first.step_numbers:
        warnings.append(f"host {name}: its steps {sorted(theirs)} differ from {first.name}'s "
                        f"{sorted(first.step_numbers)}; steps are compared by number where both have them")
    by_name = {m.name: m for m in first.modules.values()}
    keys = {op.module for op in timeline.ops}      # the same programs may have other ids on this host
    host_modules = {**{k: by_name[split_key(k)[0]] for k in keys if split_key(k)[0] in by_name}, **first.modules}
    return HostPart(Host(name=name, path=str(path), steps=timeline.steps,
                         devices=device_totals(name, timeline.device_ops, timeline.steps,
                                               host_modules, first.step_peak, timeline.allocators),
                         compile_in_steps_ns=_compile_in_steps(timeline)), warnings)


def merge_hosts(first: Profile, parts: list[HostPart]) -> Profile:
    """The run's profile: the first host's with the other hosts added in file order, and the device
    count in the name."""
    for part in parts:
        first.warnings.extend(part.warnings)
        if part.host is not None:
            first.hosts.append(part.host)
    hosts = first.hosts
    count = sum(len(h.devices) for h in hosts)
    if first.backend == "cpu" and count > 1:
        first.device_name += f", {count} devices" + (f" on {len(hosts)} hosts" if len(hosts) > 1 else "")
    return first


def _graph_notes(timeline: Timeline) -> list[str]:
    """What became of the kernels XLA ran inside command buffers (CUDA graphs)."""
    out = []
    for d in timeline.devices:
        if not d.graph_launches and not d.graph_unattributed:
            continue
        total = d.graph_kernels + d.graph_unattributed
        text = (f"{d.name}: {total:,} device events (kernels, memsets, copies) ran in {d.graph_launches:,} launches "
                f"of XLA command buffers (CUDA graphs), whose events name only the buffer; {d.graph_kernels:,} were "
                "matched to their HLO instructions by the program's schedule (docs/gpu.md)")
        if d.graph_unattributed:
            text += (f"; {d.graph_unattributed:,} could not be ({d.graph_unattributed_why}) and are counted as "
                     "\"other\" under the buffer's name")
        out.append(text)
    return out


def _compile_in_steps(timeline: Timeline) -> float:
    """The time the host spent compiling inside its steps, over all of them (the Python-side compile
    events, which wrap the client's, where the trace has them)."""
    if not timeline.steps:
        return 0.0
    events = [e for e in timeline.host_events if e.category == "compile"]
    events = [e for e in events if e.name.startswith("$")] or events
    spans = merge_intervals((e.start_ns, e.start_ns + e.duration_ns) for e in events)
    return sum(overlap_ns(spans, s.start_ns, s.end_ns) for s in timeline.steps)


def _categorize_devices(timeline, modules: dict[str, HloModule]) -> None:
    """Each device's op time by category, from the HLO instruction behind every kernel."""
    by_device = {d.name: d for d in timeline.devices}
    for op in timeline.ops:
        device = by_device.get(op.device)
        if device is None:
            continue
        module = modules.get(op.module)
        category = categorize(module.instructions.get(op.name) if module else None, op.name)
        device.time_by_category[category] = device.time_by_category.get(category, 0.0) + op.self_ns


def _capacity(device_stats: dict) -> Optional[int]:
    size = device_stats.get("memory_size")
    return int(size) if size else None


_METADATA_TYPES = {"num_params": int, "workload": str, "preset": str, "backend": str, "device_kind": str,
                   "compile_s": (int, float), "step_wall_ms_median": (int, float), "step_wall_ms": list,
                   "config": dict, "required_bytes": int, "capacity_bytes": int, "mesh": list, "host": dict,
                   "versions": dict, "xla_flags": str}


def _run_metadata(run: RunFiles, warnings: list[str]) -> dict:
    """advisor_run.json, keeping only the keys of the type advisor writes; a malformed file is ignored."""
    if run.run_metadata is None:
        return {}
    try:
        meta = load_side_json(run.run_metadata)
    except (OSError, ValueError) as err:
        warnings.append(f"{run.run_metadata}: not readable JSON ({_first_line(err)}); ignored")
        return {}
    if not isinstance(meta, dict):
        warnings.append(f"{run.run_metadata}: holds a {type(meta).__name__}, not an object; ignored")
        return {}
    for key, kind in _METADATA_TYPES.items():
        value = meta.get(key)
        if value is not None and (not isinstance(value, kind) or isinstance(value, bool)):
            warnings.append(f"{run.run_metadata}: {key} is {value!r}, not a {_type_name(kind)}; ignored")
            del meta[key]
    return meta


def _type_name(kind) -> str:
    return "number" if isinstance(kind, tuple) else {int: "whole number", str: "string", list: "list",
                                                     dict: "object"}[kind]


def _modules(protos: dict[str, bytes], warnings: list[str], step_module: Optional[str],
             ran: set[str], readers: Optional[Readers] = None) -> dict[str, HloModule]:
    """The HLO of every program that ran (has ops) and of the step program; one that cannot be read is
    named in `warnings`."""
    out, unreadable = {}, []
    for key, data in protos.items():
        if key not in ran and key != step_module:
            continue        # nothing reads the HLO of a program that did not run (the notebook trace holds 114, 1 ran)
        name, program_id = split_key(key)
        try:
            out[key] = parse_module(data, program_id)
        except Exception:  # noqa: BLE001 - protobuf raises DecodeError or RuntimeError; said in a warning
            unreadable.append(key)
    if step_module and step_module not in out:
        warnings.append(f"HLO of {step_module} could not be read: {_could_not_run(readers, 'hlo', 'the HLO')}, "
                        "and its ops are not categorized")
    ran = {k for k in ran if split_key(k)[1] >= 0}     # ops outside any program (memcpys) have no HLO
    others = sorted(k for k in set(unreadable) | (ran - set(out)) if k != step_module)
    if others:
        warnings.append(f"HLO of {', '.join(others)} could not be read: their ops are not categorized")
    return out


def _memory_at_peak(data: Optional[dict], module_key: str) -> Optional[MemoryAtPeak]:
    if not data or not isinstance(data.get("maxHeap"), list):
        return None
    try:
        buffers = [
            Buffer(instruction=b.get("instructionName", ""), shape=b.get("shapeString", "").split("{")[0],
                   bytes=int(round(float(b.get("logicalBufferSizeMib", 0)) * _MIB)),
                   group=b.get("groupName", "Other"))
            for b in data["maxHeap"]
        ]
        return MemoryAtPeak(
            module=module_key,
            peak_bytes=int(round(float(data.get("peakHeapMib", 0)) * _MIB)),
            parameter_bytes=int(round(float(data.get("entryComputationParametersMib", 0)) * _MIB)),
            buffers=buffers,
        )
    except (TypeError, ValueError, AttributeError, OverflowError):
        return None
