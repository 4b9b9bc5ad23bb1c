"""Rule selection and thresholds: from the project's config file, then the command line.

Read from the current folder: `[tool.advisor]` in pyproject.toml, else `[advisor]` in
setup.cfg. Both take `select` and `ignore` (rule ids) and `RULE.OPTION = value` thresholds;
pyproject.toml may also nest them as `[tool.advisor.options.RULE]`.
"""

from __future__ import annotations

import configparser
import dataclasses
import math
import tomllib
from pathlib import Path
from typing import Any, Iterable, Optional

from .errors import AdvisorError, did_you_mean
from .rule import Rule


@dataclasses.dataclass
class Settings:
    select: Optional[list[str]] = None      # None: every rule; [] (`select = "none"`): no rule
    ignore: list[str] = dataclasses.field(default_factory=list)
    options: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    source: str = ""


def parse_ids(values: Iterable[str], where: str = "--select") -> list[str]:
    """Rule ids given as sets, in the grammar of every set advisor reads (advisor.workloads.config):
    `a+b` or `a,b` (a line each, in setup.cfg), `none` for no rule."""
    from advisor.workloads.config import ConfigError, split_set

    out: list[str] = []
    for value in values:
        try:
            items = split_set(value.replace("\n", ","))
        except ConfigError as err:
            raise AdvisorError(f"{where}: {err}") from None
        out += [i for i in dict.fromkeys(items) if i not in out]
    return out


def _split_ids(value, where: str = "select") -> Optional[list[str]]:
    if value is None:
        return None
    if isinstance(value, str):
        return parse_ids([value], where)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return parse_ids(value, where)
    raise AdvisorError(f"{where} = {value!r}: expected a list of rule ids, e.g. [\"host-bound\"]")


def read_project_settings(folder: Path) -> Settings:
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
            return Settings(_split_ids(section.get("select"), f"{where} select"),
                            _split_ids(section.get("ignore"), f"{where} ignore") or [], _group(raw, where), where)
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
            return Settings(_split_ids(sec.get("select"), f"{where} select"),
                            _split_ids(sec.get("ignore"), f"{where} ignore") or [], _group(raw, where), where)
    return Settings()


def _group(raw: dict[str, Any], where: str) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for key, value in raw.items():
        if "." not in key:
            raise AdvisorError(f"{where}: unknown key {key!r}; use select, ignore, or RULE.OPTION = value")
        rule, option = key.split(".", 1)
        out.setdefault(rule, {})[option] = value
    return out


def parse_option_flags(items: Iterable[str]) -> dict[str, dict[str, Any]]:
    """`--option RULE.KEY=VALUE` flags."""
    raw = {}
    for item in items:
        if "=" not in item or "." not in item.split("=", 1)[0]:
            raise AdvisorError(f"--option expects RULE.OPTION=VALUE, got {item!r} "
                               "(e.g. --option scan-dynamic-update-slice.min_share=0.1)")
        key, value = item.split("=", 1)
        raw[key.strip()] = value.strip()
    return _group(raw, "--option")


def validate_options(options: dict[str, dict[str, Any]], rules: dict[str, Rule]) -> dict[str, dict[str, Any]]:
    """Options checked against each rule's thresholds and converted to their types."""
    out: dict[str, dict[str, Any]] = {}
    for rule_id, opts in options.items():
        if rule_id not in rules:
            raise AdvisorError(f"option for unknown rule {rule_id!r}; {did_you_mean(rule_id, rules, 'ids')}")
        known = rules[rule_id].options
        for key, value in opts.items():
            if key not in known:
                takes = did_you_mean(key, known, "options") if known else "it takes no options"
                raise AdvisorError(f"unknown option {rule_id}.{key}; {takes} (see `advisor explain {rule_id}`)")
            out.setdefault(rule_id, {})[key] = _convert(value, known[key], f"{rule_id}.{key}")
    return out


_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def _convert(value, default, name: str):
    """value given for an option whose default is `default`, as that type; anything else is an error
    naming the option, the value and what was expected."""
    if isinstance(default, bool):
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in _TRUE + _FALSE:
            return value.lower() in _TRUE
        raise AdvisorError(f"bad value for {name}: {value!r} is not true or false")
    is_int = isinstance(default, int) or default is None
    try:
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise ValueError
        number = parse_size(value) if isinstance(value, str) and is_int else float(value)
    except (ValueError, OverflowError):
        number = math.nan
    if not math.isfinite(number) or number < 0:
        expected = "a whole number of at least 0 (sizes like 64MiB too)" if is_int else "a number of at least 0"
        raise AdvisorError(f"bad value for {name}: {value!r} is not {expected}")
    return int(number) if is_int else number


_UNITS = {"": 1, "b": 1, "kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12,
          "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
          # as Kubernetes writes them: 16G is 16e9 bytes, 16Gi is 16 GiB
          "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12, "ki": 2**10, "mi": 2**20, "gi": 2**30, "ti": 2**40}


def parse_size(text: str) -> float:
    """`24GB`, `24 GiB`, `512MiB`, `1e9` -> bytes."""
    t = text.strip().lower().replace(" ", "")
    num = t.rstrip("abcdefghijklmnopqrstuvwxyz")
    unit = t[len(num):]
    if unit not in _UNITS or not num:
        raise ValueError(text)
    value = float(num) * _UNITS[unit]
    if not math.isfinite(value):
        raise ValueError(text)
    return value


def parse_steps_flag(text, flag: str = "--steps") -> Optional[slice]:
    """`A:B` (`A:` or `:B` open-ended): the steps numbered A to B-1, as a Python slice of numbers
    reads; a bare `N` is step N alone. None when not given; a bad one is one clear error."""
    if text is None or text == "":
        return None
    if isinstance(text, slice):
        ends = (text.start, text.stop)
        if text.step is None and all(e is None or (isinstance(e, int) and not isinstance(e, bool)) for e in ends) \
                and (None in ends or text.start < text.stop):
            return text
        raise AdvisorError(f"{flag} expects a slice of step numbers (ints, start < stop, no step), got {text!r}")
    parts = str(text).split(":")
    try:
        if len(parts) == 1:
            number = int(parts[0])
            return slice(number, number + 1)
        if len(parts) == 2:
            start, stop = (int(p) if p.strip() else None for p in parts)
            if start is None or stop is None or start < stop:
                return slice(start, stop)
    except ValueError:
        pass
    raise AdvisorError(f"{flag} expects step numbers A:B (steps A to B-1; A: or :B for open ends; "
                       f"N for one step) with A < B, got {text!r}")


def parse_size_flag(text, flag: str):
    """A size flag's value in whole bytes (None when not given); a bad one is one clear error."""
    if not text:
        return None
    try:
        size = int(parse_size(text))
    except (ValueError, OverflowError):
        size = 0
    if size <= 0:
        raise AdvisorError(f"{flag} expects a positive size like 24GB, 16GiB or 512MiB, got {text!r}")
    return size


_RATE_PREFIX = {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12, "p": 1e15}


def parse_rate(value, flag: str, unit: str) -> Optional[float]:
    """A peak rate (None when not given): a number per second, with an optional SI prefix and the unit,
    e.g. 989e12, 989T, 989TFLOP/s for --peak-flops, 3.35TB/s or 819GB/s for --peak-bandwidth."""
    if value is None or value == "":
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        rate = float(value)
    else:
        text = str(value).strip().replace(" ", "")
        low = text.lower()
        for suffix in (f"{unit.lower()}/s", unit.lower(), "/s"):
            if low.endswith(suffix):
                low = low[: -len(suffix)]
                break
        prefix = low[-1:] if low[-1:] in _RATE_PREFIX and not low[-1:].isdigit() else ""
        try:
            rate = float(low[: len(low) - len(prefix)]) * _RATE_PREFIX[prefix]
        except ValueError:
            rate = 0.0
    if not rate > 0 or rate == float("inf"):
        raise AdvisorError(f"{flag} expects a positive rate like 989T{unit}/s or 989e12, got {value!r}")
    return rate
