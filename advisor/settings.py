"""The user's settings: every one that changes an analysis, in one `Settings` bound to each run
once; and each value the user gives, parsed and checked (one clear error for a bad one).

`Settings` holds the steps window, the device memory, the peaks, the mesh and the rules' options
that views read (`Rule.binds`). The job binds them to the profile (`bind`, in `Job.bind`) before
any view is computed, with what it finds for the run besides (advisor calibrate's figures for the
machine the run records); the views and rules read them from the profile (`bound`). A setting
never writes over a fact: the trace's device capacity stays `profile.device_capacity_bytes`, and
`device_capacity` is the one the analysis uses (--device-memory, else the trace's).

Nothing here reads a file: the rules chosen and their thresholds in the project's config file are
read by advisor/user_input.py, which makes a Job of all the user gave.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Iterable, Optional

from .errors import AdvisorError, did_you_mean
from .model import Profile
from .peak_table import UserPeaks

MIN_IDLE_SHARE = 0.2    # idle this share of the steps or more is host-bound (host-bound's min_idle_share default)
# A kernel shorter than this (ns) is mostly its launch's fixed cost (a few µs of launch and ramp-up) on a
# GPU: many of them make a step launch-bound. One of the loader's kernel duration buckets' edges.
SMALL_KERNEL_NS = 10_000.0
_KEY = "settings"       # where the bound settings are kept among the profile's views


@dataclasses.dataclass(frozen=True)
class Settings:
    """Every user setting that changes an analysis (picklable: it travels in the Job to worker processes
    and Ray tasks)."""
    steps: Optional[slice] = None               # --steps A:B: only the steps numbered in this slice (loader's window)
    device_memory: Optional[int] = None         # --device-memory (bytes): the capacity, in place of the trace's
    peaks: Optional[UserPeaks] = None           # --peak-flops/--peak-bandwidth: in place of the device table's
    mesh: Optional[tuple[tuple[str, int], ...]] = None     # --mesh: the axes, major first
    min_idle_share: float = MIN_IDLE_SHARE      # idle steps are host-bound from this share (host-bound's option)
    small_kernel_ns: float = SMALL_KERNEL_NS    # a kernel shorter than this is small (views.kernels, launch-bound)
    # found for the run when the job binds them, not given by the user
    calibration: Optional[UserPeaks] = None     # advisor calibrate's, for the machine the run records
    calibration_unused: str = ""                # why a calibration of a host of the trace's name is not used
    this_host: str = ""                         # the machine analyzing (a CPU trace's peaks the user gives name it)

    def __post_init__(self):
        if self.mesh is not None:       # [(name, size), ...] from parse_mesh: kept as tuples
            object.__setattr__(self, "mesh", tuple(map(tuple, self.mesh)))


def bind(profile: Profile, settings: Settings) -> None:
    """The settings the profile's views are computed with; views computed with others are dropped."""
    if profile.views.get(_KEY) != settings:
        profile.views.clear()
        profile.views[_KEY] = settings


def bound(profile: Profile) -> Settings:
    """The settings bound to the profile (the defaults where none are)."""
    return profile.views.get(_KEY) or Settings()


def device_capacity(profile: Profile) -> Optional[int]:
    """The device memory capacity the analysis uses (bytes): the user's (--device-memory, run-workload's
    --memory-limit), else the trace's; None where neither is known."""
    return bound(profile).device_memory or profile.device_capacity_bytes


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


def group_options(raw: dict[str, Any], where: str) -> dict[str, dict[str, Any]]:
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
    return group_options(raw, "--option")


def validate_options(options: dict[str, dict[str, Any]], rules: dict) -> dict[str, dict[str, Any]]:
    """Options checked against each rule's thresholds (rules: {id: advisor.rule.Rule}) and converted to
    their types."""
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


def parse_size_setting(value, name: str) -> Optional[int]:
    """A size given as bytes (a number) or text such as "16GB" (None when not given); a bad one is one
    clear error naming it."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise AdvisorError(f"{name} expects a size in bytes or a string like \"16GB\", got {value!r}")
    if isinstance(value, (int, float)):
        if not value > 0 or value != value or value == float("inf"):
            raise AdvisorError(f"{name} expects a positive size in bytes, got {value!r}")
        return int(value)
    return parse_size_flag(value, name)


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


def user_peaks(flops, bandwidth, flops_name: str = "--peak-flops",
               bandwidth_name: str = "--peak-bandwidth") -> Optional[UserPeaks]:
    """The peaks a user gave (numbers, or text such as 989T or 3.35TB/s), or None; a bad value is one
    clear error (AdvisorError)."""
    f = parse_rate(flops, flops_name, "FLOP")
    b = parse_rate(bandwidth, bandwidth_name, "B")
    if f is None and b is None:
        return None
    return UserPeaks(f, b, flops_name, bandwidth_name)
