"""User input becomes a Job here, and only here: the command line (advisor/cli.py), the Python API
(advisor/api.py) and the TensorBoard tab (advisor/tensorboard/) each call `job` with what the user
gave, in the words they gave it (`CLI`, `API`: the names bad input's one-line errors quote).

The rules chosen and their options come from the project's config file (`RuleConfig`, read by
`read_project_settings` from the current folder: `[tool.advisor]` in pyproject.toml, else
`[advisor]` in setup.cfg; both take `select` and `ignore` (rule ids) and `RULE.OPTION = value`
thresholds; pyproject.toml may also nest them as `[tool.advisor.options.RULE]`), overridden by what
the user gave; every other setting that changes an analysis goes into the one `Settings`
(advisor/settings.py) the job binds to each run.
"""

from __future__ import annotations

import configparser
import dataclasses
import tomllib
from pathlib import Path
from typing import Any, Iterable, Optional, Union

from .errors import AdvisorError
from .job import Job
from .settings import (
    Settings,
    group_options,
    parse_ids,
    parse_option_flags,
    parse_size_setting,
    parse_steps_flag,
    user_peaks,
    validate_options,
)


@dataclasses.dataclass(frozen=True)
class Names:
    """How the user named each setting: the name its error quotes."""
    select: str
    ignore: str
    device_memory: str
    steps: str
    peak_flops: str
    peak_bandwidth: str
    mesh: str


CLI = Names("--select", "--ignore", "--device-memory", "--steps", "--peak-flops", "--peak-bandwidth", "--mesh")
API = Names("select", "ignore", "device_memory", "steps", "peak_flops=", "peak_bandwidth=", "mesh")


def job(select: Union[str, Iterable[str], None] = None, ignore: Union[str, Iterable[str], None] = (),
        options: Optional[dict[str, dict[str, Any]]] = None, option_flags: Iterable[str] = (),
        device_memory: Union[int, float, str, None] = None, steps: Union[str, slice, None] = None,
        peak_flops: Union[float, str, None] = None, peak_bandwidth: Union[float, str, None] = None,
        peaks=None, mesh=None, project: Optional[RuleConfig] = None, memory_limit: Optional[int] = None,
        names: Names = CLI, compile_check: bool = False, documents: bool = False) -> Job:
    """The Job of what the user gave; a bad value is one clear error (AdvisorError), checked in this order.

    select/ignore: rule ids, a string in the grammar of every set ("a+b", "none") or a list of them
    (select None, ignore empty: the project's); options: {rule id: {option: value}}, or option_flags:
    `RULE.OPTION=VALUE` items (over the project's options); device_memory: bytes or "24GB";
    steps: "A:B" or a slice; peak_flops/peak_bandwidth: numbers or "989T", "3.35TB/s" (or peaks, a
    UserPeaks); mesh: a jax.sharding.Mesh, {name: size} or "data=2,pipe=2"; memory_limit: bytes, the
    capacity where device_memory is not given (run-workload's --memory-limit)."""
    from . import rules as catalog

    project = project or RuleConfig()
    rules = catalog.select(project.select if select is None else _ids(select, names.select),
                           _ids(ignore, names.ignore) if ignore else project.ignore)
    by_id = {r.id: r for r in catalog.ALL}
    chosen = validate_options(project.options, by_id)
    given = parse_option_flags(option_flags) if options is None else options
    for rule_id, opts in validate_options(given, by_id).items():
        chosen.setdefault(rule_id, {}).update(opts)
    capacity = parse_size_setting(device_memory, names.device_memory)
    settings = Settings(steps=parse_steps_flag(steps, names.steps), device_memory=capacity or memory_limit,
                        peaks=peaks or user_peaks(peak_flops, peak_bandwidth, names.peak_flops, names.peak_bandwidth),
                        mesh=parse_mesh_setting(mesh, names.mesh))
    return Job(tuple(rules), chosen, settings, compile_check=compile_check, documents=documents)


@dataclasses.dataclass
class RuleConfig:
    """The rules chosen and their thresholds, from the project's config file."""
    select: Optional[list[str]] = None      # None: every rule; [] (`select = "none"`): no rule
    ignore: list[str] = dataclasses.field(default_factory=list)
    options: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    source: str = ""



def _split_ids(value, where: str = "select") -> Optional[list[str]]:
    if value is None:
        return None
    if isinstance(value, str):
        return parse_ids([value], where)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return parse_ids(value, where)
    raise AdvisorError(f"{where} = {value!r}: expected a list of rule ids, e.g. [\"host-bound\"]")



def read_project_settings(folder: Path) -> RuleConfig:
    pyproject, setup_cfg = folder / "pyproject.toml", folder / "setup.cfg"
    if pyproject.is_file():
        try:
            doc = tomllib.loads(pyproject.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, OSError, UnicodeDecodeError, RecursionError) as err:
            reason = "nested too deeply" if isinstance(err, RecursionError) else err
            raise AdvisorError(f"{pyproject}: cannot read it ({reason}); fix the file or run advisor elsewhere") \
                from None
        tool = doc.get("tool")
        section = tool.get("advisor") if isinstance(tool, dict) else None
        where = f"{pyproject} [tool.advisor]"
        if section is not None:
            if not isinstance(section, dict):
                raise AdvisorError(f"{where}: expected a table, got {section!r}")
            raw = {k: v for k, v in section.items() if k not in ("select", "ignore", "options")}
            options = section.get("options") or {}
            if not isinstance(options, dict) or not all(isinstance(o, dict) for o in options.values()):
                raise AdvisorError(f"{where} options = {options!r}: expected tables of RULE.OPTION = value, "
                                   "e.g. [tool.advisor.options.host-bound] min_idle_share = 0.3")
            for rule, opts in options.items():
                for key, value in opts.items():
                    raw[f"{rule}.{key}"] = value
            return RuleConfig(_split_ids(section.get("select"), f"{where} select"),
                            _split_ids(section.get("ignore"), f"{where} ignore") or [], group_options(raw, where),
                            where)
    if setup_cfg.is_file():
        parser = configparser.ConfigParser(interpolation=None)    # a `%` in a value is a `%`
        try:
            parser.read(setup_cfg, encoding="utf-8")
        except configparser.Error as err:
            raise AdvisorError(f"{setup_cfg}: cannot read it ({err.message.splitlines()[0]})") from None
        except UnicodeDecodeError as err:
            raise AdvisorError(f"{setup_cfg}: cannot read it (not UTF-8: {err.reason})") from None
        if parser.has_section("advisor"):
            sec = dict(parser.items("advisor"))
            raw = {k: v for k, v in sec.items() if k not in ("select", "ignore")}
            where = f"{setup_cfg} [advisor]"
            return RuleConfig(_split_ids(sec.get("select"), f"{where} select"),
                            _split_ids(sec.get("ignore"), f"{where} ignore") or [], group_options(raw, where), where)
    return RuleConfig()



def _ids(value: Union[str, Iterable[str]], name: str) -> list[str]:
    return parse_ids([value] if isinstance(value, str) else list(value), name)


def parse_mesh_setting(mesh, name: str = "--mesh"):
    """The mesh's axes ((name, size), ...) from a jax.sharding.Mesh, {name: size} or "data=2,pipe=2";
    None when not given."""
    if mesh is None:
        return None
    from .views.parallelism.mesh import parse_mesh
    try:
        return parse_mesh(mesh)
    except ValueError as err:
        raise AdvisorError(f"{name}: {err}") from None
