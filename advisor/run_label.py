"""Runs named by what they ran: the bundled workload, its preset, and the settings that differ, so
that the runs of one sweep can be told apart (in the run picker, serve's index, the fleet table,
compare), not by their timestamps alone.

A run's settings come from its advisor_run.json (`workload`, `preset`, `config`): the config keys
whose value differs from the preset's, written as `--set` takes them (`model.remat=MLP+Attn`). The
file is a stranger's: anything that is not a known workload and preset gives no settings, and every
value is cut to a bounded length (renderers escape the text, as all text from a run)."""

from __future__ import annotations

import collections
import functools
import json
import os
from pathlib import Path
from typing import Optional

MAX_VALUE = 40          # characters of one value shown
MAX_METADATA = 1 << 20  # advisor_run.json is a few KB; a larger one is not advisor's


def _text(value) -> str:
    from advisor.workloads.config import format_value

    text = format_value(value) if isinstance(value, (str, bool, int, float, list, tuple)) or value is None \
        else json.dumps(value, default=str)
    return text if len(text) <= MAX_VALUE else text[:MAX_VALUE - 1] + "…"


def _preset(workload, preset) -> Optional[dict]:
    """The preset's whole config (None for an unknown workload or preset); shared: never changed."""
    if not isinstance(workload, str) or not isinstance(preset, str):
        return None
    return _resolved(workload, preset)


@functools.lru_cache(maxsize=64)
def _resolved(workload: str, preset: str) -> Optional[dict]:
    from advisor import workloads
    from advisor.workloads.config import ConfigError

    try:
        return workloads.resolve(workload, preset, [])
    except ConfigError:
        return None


def settings(meta: dict) -> dict[str, str]:
    """The run's config keys whose value differs from its preset's, and the keys a sweep varied
    whatever their value (its default row names them too), in the schema's order, as text."""
    if not isinstance(meta, dict):
        return {}
    base, config = _preset(meta.get("workload"), meta.get("preset")), meta.get("config")
    if base is None or not isinstance(config, dict):
        return {}
    sweep = meta.get("sweep") if isinstance(meta.get("sweep"), dict) else {}
    varied = set(k for k in sweep.get("varied", ()) if isinstance(k, str)) if isinstance(sweep.get("varied"), list) \
        else set()
    out = {}
    for section, fields in base.items():
        given = config.get(section)
        if not isinstance(given, dict):
            continue
        for key, default in fields.items():
            if key in given and (_text(given[key]) != _text(default) or f"{section}.{key}" in varied):
                out[f"{section}.{key}"] = _text(given[key])
    return out


def run_info(meta: dict) -> Optional[dict]:
    """{"workload", "preset", "settings"} of a run a bundled workload recorded, else None."""
    if not isinstance(meta, dict) or not isinstance(meta.get("workload"), str):
        return None
    preset = meta.get("preset") if isinstance(meta.get("preset"), str) else "?"
    return {"workload": _cut(meta["workload"]), "preset": _cut(preset), "settings": settings(meta)}


def from_summary(run: Optional[dict]) -> Optional[dict]:
    """run_info from a report's summary.run ({"workload", "preset", "settings", ...}), else None."""
    if not isinstance(run, dict) or not isinstance(run.get("workload"), str):
        return None
    settings_ = run.get("settings") if isinstance(run.get("settings"), dict) else {}
    return {"workload": _cut(run["workload"]), "preset": _cut(str(run.get("preset") or "?")),
            "settings": {str(k): _text(v) for k, v in settings_.items()}}


def _cut(text: str) -> str:
    return text if len(text) <= MAX_VALUE else text[:MAX_VALUE - 1] + "…"


def label(info: Optional[dict], keys=None) -> str:
    """`transformer (tiny) model.remat=MLP+Attn`: the workload, its preset and the settings it changed;
    with `keys`, those keys alone, each with its value (the preset's where the run left it); "" for a
    run no bundled workload recorded."""
    if not info:
        return ""
    return " ".join([f"{info['workload']} ({info['preset']})", *_shown(info, keys)])


def _shown(info: dict, keys=None) -> list[str]:
    """label's settings, `key=value` each."""
    values = info.get("settings") or {}
    if keys is None:
        return [f"{k}={v}" for k, v in values.items()]
    preset = _preset_flat(info["workload"], info["preset"])
    return [f"{k}={values.get(k, preset.get(k, '?'))}" for k in keys]


def labels(infos: list[Optional[dict]]) -> list[str]:
    """Labels for runs listed together: among the runs of one workload and preset, only the settings
    that differ from run to run (a sweep's varied keys), so a long list reads by what changed; a run
    alone with its workload and preset shows all its settings."""
    varied = _varied(infos)
    return [label(i, varied.get((i["workload"], i["preset"]))) if i else "" for i in infos]


def _varied(infos: list[Optional[dict]]) -> dict[tuple, list[str]]:
    """(workload, preset) -> the settings that differ among its runs (groups of two runs or more)."""
    groups: dict[tuple, list[dict]] = {}
    for info in infos:
        if info:
            groups.setdefault((info["workload"], info["preset"]), []).append(info)
    varied = {}
    for key, group in groups.items():
        if len(group) < 2:
            continue
        order = list(_preset_flat(*key))       # the schema's order, whichever run set a key first
        names = sorted(dict.fromkeys(k for i in group for k in i["settings"]),
                       key=lambda k: order.index(k) if k in order else len(order))
        varied[key] = [k for k in names if len({i["settings"].get(k) for i in group}) > 1]
    return varied


def settings_first(infos: list[Optional[dict]]) -> list[str]:
    """labels' text with the settings first, each run's rarest values among the runs of its workload
    and preset leading (`model.remat=Block model.dtype=float32 · transformer (tiny)`): what tells a
    run apart stays in sight where a line is cut (a run picker's option)."""
    varied = _varied(infos)
    shown = [_shown(i, varied.get((i["workload"], i["preset"]))) if i else [] for i in infos]
    counts = collections.Counter((i["workload"], i["preset"], s) for i, kv in zip(infos, shown) if i for s in kv)
    out = []
    for info, kv in zip(infos, shown):
        if not info:
            out.append("")
            continue
        kv = sorted(kv, key=lambda s: counts[info["workload"], info["preset"], s])    # stable: schema order on ties
        out.append(" · ".join(filter(None, [" ".join(kv), f"{info['workload']} ({info['preset']})"])))
    return out


def changes(base: Optional[dict], new: Optional[dict]) -> list[str]:
    """The settings that differ between two runs, `model.remat: none -> MLP+Attn` (a key one side
    does not set reads as its preset's value); [] when either run is not a bundled workload's."""
    if not base or not new:
        return []
    out = []
    if (base["workload"], base["preset"]) != (new["workload"], new["preset"]):
        out.append(f"workload: {base['workload']} ({base['preset']}) -> {new['workload']} ({new['preset']})")
    defaults = [_preset_flat(i["workload"], i["preset"]) for i in (base, new)]
    for key in dict.fromkeys([*base["settings"], *new["settings"]]):
        a = base["settings"].get(key, defaults[0].get(key, "(not set)"))
        b = new["settings"].get(key, defaults[1].get(key, "(not set)"))
        if a != b:
            out.append(f"{key}: {a} -> {b}")
    return out


def recording_changes(base: Optional[dict], new: Optional[dict]) -> list[str]:
    """`command buffers: used -> not used`, `XLA_FLAGS: (none) -> --xla_gpu_enable_command_buffer=`: what
    differs in how two runs were recorded (summary.recorded_with); a key one side does not know is not
    compared."""
    if not isinstance(base, dict) or not isinstance(new, dict):
        return []
    out = []
    for key in dict.fromkeys([*base, *new]):
        if key in base and key in new and base[key] != new[key]:
            name = "XLA_FLAGS" if key == "xla_flags" else key.replace("_", " ")
            out.append(f"{name}: {base[key] or '(none)'} -> {new[key] or '(none)'}")
    return out


def _flat(config: Optional[dict]) -> dict[str, str]:
    return {f"{s}.{k}": _text(v) for s, fields in (config or {}).items() for k, v in fields.items()}


@functools.lru_cache(maxsize=64)
def _preset_flat(workload: str, preset: str) -> dict[str, str]:
    """The preset's values as text, by key (shared: never changed)."""
    return _flat(_preset(workload, preset))


def read(path: Optional[Path]) -> Optional[dict]:
    """run_info of the advisor_run.json at `path` (None if absent or unreadable); cached on its size
    and modification time, so listing a logdir again reads nothing new."""
    if path is None:
        return None
    try:
        st = os.stat(path)
    except OSError:
        return None
    return _read(str(path), st.st_size, st.st_mtime_ns)


@functools.lru_cache(maxsize=4096)
def _read(path: str, size: int, mtime_ns: int) -> Optional[dict]:
    if size > MAX_METADATA:
        return None
    try:
        with open(path, "rb") as fh:
            meta = json.loads(fh.read(MAX_METADATA + 1))
    except (OSError, ValueError, RecursionError):
        return None
    return run_info(meta)
