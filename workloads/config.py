"""Workload configs: nested sections of typed fields, presets, and `--set` overrides.

One grammar for a value, wherever it is given (`--set`, `--vary`, `check --workload`, the API's
dicts): `true`/`false`, numbers, a choice, or a set of items joined by `+` (`MLP+Attn`) with `none`
for the empty set. `format_value` writes a value back in that grammar, so what advisor prints
(`config: --set model.remat=MLP+Attn`) can be pasted into any of them.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any, Callable

from advisor.errors import did_you_mean


class ConfigError(ValueError):
    """A config key or value the user gave is not valid; the message says what is."""


@dataclasses.dataclass(frozen=True)
class Field:
    default: Any
    parse: Callable[[str], Any]
    help: str
    choices: tuple = ()


def parse_bool(text: str) -> bool:
    low = text.strip().lower()
    if low in ("1", "true", "yes", "on"):
        return True
    if low in ("0", "false", "no", "off"):
        return False
    raise ConfigError(f"expected true or false, got {text!r}")


def parse_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise ConfigError(f"expected an integer, got {text!r}") from None
    if value < 0:
        raise ConfigError(f"expected a non-negative integer, got {text!r}")
    return value


def parse_float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ConfigError(f"expected a number, got {text!r}") from None


def parse_choice(choices: tuple) -> Callable[[str], str]:
    def parse(text: str) -> str:
        if text not in choices:
            raise ConfigError(f"got {text!r}; {did_you_mean(text, choices, 'values')}")
        return text
    return parse


NONE = "none"     # the empty set, as written on a command line or in a sweep's row


def split_set(text: str) -> list[str]:
    """A set's items as written: joined by `+` (or `,` where the value stands alone, as in
    `--set model.remat=MLP,Attn`); `none` (or nothing) is the empty set. An empty item
    (`MLP++Attn`, `MLP+`) is an error."""
    t = text.strip()
    if t == "" or t.lower() == NONE:
        return []
    items = [x.strip() for x in t.replace(",", "+").split("+")]
    if any(not x for x in items):
        raise ConfigError(f"empty item in {text!r}: join the items with '+' (e.g. MLP+Attn), or write none")
    return items


def parse_subset(choices: tuple) -> Callable[[str], tuple]:
    """A subset of `choices`, e.g. `MLP+Attn`; `none` is the empty set (see split_set)."""
    def parse(text: str) -> tuple:
        try:
            items = split_set(text)
        except ConfigError:
            items = [""]
        unknown = [x for x in items if x not in choices]
        if unknown:
            hint = did_you_mean(unknown[0], choices, "items") if unknown[0] else f"valid items: {', '.join(choices)}"
            raise ConfigError(f"got {text!r}; {hint}, joined by '+' (e.g. {'+'.join(choices[:2])}), or none")
        return tuple(x for x in choices if x in items)
    return parse


def format_value(value: Any) -> str:
    """A config value as a user writes it: true/false, a number, a choice, `MLP+Attn`, `none`."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (list, tuple)):
        return "+".join(map(str, value)) if value else NONE
    if value is None:
        return NONE
    return str(value)


def flatten(schema: dict[str, dict[str, Field]]) -> dict[str, Field]:
    return {f"{section}.{key}": field for section, fields in schema.items() for key, field in fields.items()}


def defaults(schema: dict[str, dict[str, Field]]) -> dict[str, dict[str, Any]]:
    return {section: {k: f.default for k, f in fields.items()} for section, fields in schema.items()}


def resolve(schema, presets: dict[str, dict[str, Any]], preset: str,
            overrides: list[str] | dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Defaults, then the preset's values, then the overrides (`key=value` strings or a dict)."""
    if preset not in presets:
        raise ConfigError(f"unknown preset {preset!r}; {did_you_mean(preset, presets, 'presets')}")
    config = defaults(schema)
    flat = flatten(schema)
    for key, value in presets[preset].items():
        section, name = key.split(".", 1)
        config[section][name] = value
    items = overrides.items() if isinstance(overrides, dict) else [_split(o) for o in overrides]
    for key, value in items:
        if key not in flat:
            raise ConfigError(f"unknown config key {key!r}; {did_you_mean(key, flat, 'keys')}")
        section, name = key.split(".", 1)
        # a value given as a Python value (the API's dicts) is read as its text: one grammar, checked
        text = value if isinstance(value, str) else format_value(value)
        try:
            config[section][name] = flat[key].parse(text)
        except ConfigError as err:
            raise ConfigError(f"bad value for {key}: {err}") from None
    return copy.deepcopy(config)


def _split(item: str) -> tuple[str, str]:
    if "=" not in item:
        raise ConfigError(f"expected KEY=VALUE, got {item!r} (e.g. --set model.scan_layers=false)")
    key, value = item.split("=", 1)
    return key.strip(), value.strip()


def as_items(change: dict) -> list[str]:
    """{"model.remat": ["MLP", "Attn"]} -> ["model.remat=MLP+Attn"]: `--set` items in the one grammar."""
    return [f"{k}={format_value(v)}" for k, v in change.items()]


def to_json(config: dict) -> dict:
    """Config with tuples as lists, for JSON."""
    return {s: {k: list(v) if isinstance(v, tuple) else v for k, v in f.items()} for s, f in config.items()}
