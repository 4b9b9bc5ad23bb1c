"""Load one traced host into the profile model."""

from __future__ import annotations

import json
from typing import Optional

from ..errors import AdvisorError
from ..locate import RunFiles
from ..model import Buffer, HloModule, MemoryAtPeak, Profile
from ..categories import categorize
from .hlo import parse_module, split_key
from .memprof import read_memory_profile
from .timeline import read_timeline
from .xprof_tools import XprofSession

_MIB = 1024 * 1024


def load_profile_data(path):
    """`ProfileData` for the file, or one clear error if it is not an XSpace."""
    from jax.profiler import ProfileData

    try:
        return ProfileData.from_file(str(path))
    except Exception as err:  # noqa: BLE001 - the C++ parser raises plain RuntimeErrors/ValueErrors
        raise AdvisorError(f"{path}: cannot parse this .xplane.pb ({_first_line(err)}); "
                           "it may be truncated or corrupt: record the trace again") from None


def _first_line(err: Exception) -> str:
    text = str(err).strip().splitlines()
    return text[0][:160] if text else type(err).__name__


def load_run(run: RunFiles) -> Profile:
    profile_data = load_profile_data(run.xplane)
    timeline = read_timeline(profile_data)
    del profile_data
    meta = _run_metadata(run)

    with XprofSession(run.xplane) as xprof:
        modules = _modules(xprof)
        step_module = timeline.step_module
        memory = _memory_at_peak(xprof, step_module) if step_module in modules else None

    backend = timeline.backend
    device_name = timeline.device_name or meta.get("device_kind", "") or backend
    _categorize_devices(timeline, modules)
    notes = []
    if backend == "unknown":
        notes.append("no XLA op events found in this trace: was anything running while it was recorded?")
    return Profile(
        path=str(run.xplane),
        backend=backend,
        device_name=device_name,
        steps=timeline.steps,
        ops=timeline.ops,
        modules=modules,
        step_module=step_module,
        memory=memory,
        device_memory_profile=read_memory_profile(run.memory_profile) if run.memory_profile else [],
        run_metadata=meta,
        device_capacity_bytes=_capacity(timeline.device_stats),
        notes=notes,
        busy=timeline.busy,
        host_events=timeline.host_events,
        transfers=timeline.transfers,
        devices=timeline.devices,
        allocators=timeline.allocators,
    )


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


def _run_metadata(run: RunFiles) -> dict:
    if run.run_metadata is None:
        return {}
    try:
        return json.loads(run.run_metadata.read_text())
    except (OSError, ValueError):
        return {}


def _modules(xprof: XprofSession) -> dict[str, HloModule]:
    out = {}
    for key, data in xprof.hlo_protos().items():
        name, program_id = split_key(key)
        try:
            out[key] = parse_module(data, program_id)
        except Exception:  # noqa: BLE001 - a module we cannot read is left out, not fatal
            continue
    return out


def _memory_at_peak(xprof: XprofSession, module_key: str) -> Optional[MemoryAtPeak]:
    data = xprof.memory_viewer(module_key)
    if not data or "maxHeap" not in data:
        return None
    buffers = [
        Buffer(instruction=b.get("instructionName", ""), shape=b.get("shapeString", "").split("{")[0],
               bytes=int(round(float(b.get("logicalBufferSizeMib", 0)) * _MIB)), group=b.get("groupName", "Other"))
        for b in data["maxHeap"]
    ]
    return MemoryAtPeak(
        module=module_key,
        peak_bytes=int(round(float(data.get("peakHeapMib", 0)) * _MIB)),
        parameter_bytes=int(round(float(data.get("entryComputationParametersMib", 0)) * _MIB)),
        buffers=buffers,
    )
