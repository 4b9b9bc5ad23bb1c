"""Workload configs: nested sections of typed fields, presets, and `--set` overrides."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any, Callable


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
            raise ConfigError(f"expected one of {', '.join(choices)}, got {text!r}")
        return text
    return parse


def parse_subset(choices: tuple) -> Callable[[str], tuple]:
    """Comma-separated subset, e.g. `MLP,Attn`; the empty string means none."""
    def parse(text: str) -> tuple:
        items = tuple(x.strip() for x in text.split(",") if x.strip())
        bad = [x for x in items if x not in choices]
        if bad:
            raise ConfigError(
                f"expected a comma-separated subset of {', '.join(choices)} (or empty), got {text!r}")
        return tuple(x for x in choices if x in items)
    return parse


def flatten(schema: dict[str, dict[str, Field]]) -> dict[str, Field]:
    return {f"{section}.{key}": field for section, fields in schema.items() for key, field in fields.items()}


def defaults(schema: dict[str, dict[str, Field]]) -> dict[str, dict[str, Any]]:
    return {section: {k: f.default for k, f in fields.items()} for section, fields in schema.items()}


def resolve(schema, presets: dict[str, dict[str, Any]], preset: str,
            overrides: list[str] | dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Defaults, then the preset's values, then the overrides (`key=value` strings or a dict)."""
    if preset not in presets:
        raise ConfigError(f"unknown preset {preset!r}; valid presets: {', '.join(presets)}")
    config = defaults(schema)
    flat = flatten(schema)
    for key, value in presets[preset].items():
        section, name = key.split(".", 1)
        config[section][name] = value
    items = overrides.items() if isinstance(overrides, dict) else [_split(o) for o in overrides]
    for key, value in items:
        if key not in flat:
            raise ConfigError(f"unknown config key {key!r}; valid keys: {', '.join(flat)}")
        section, name = key.split(".", 1)
        if isinstance(value, str):
            try:
                value = flat[key].parse(value)
            except ConfigError as err:
                raise ConfigError(f"bad value for {key}: {err}") from None
        config[section][name] = value
    return copy.deepcopy(config)


def _split(item: str) -> tuple[str, str]:
    if "=" not in item:
        raise ConfigError(f"expected KEY=VALUE, got {item!r} (e.g. --set model.scan_layers=false)")
    key, value = item.split("=", 1)
    return key.strip(), value.strip()


def to_json(config: dict) -> dict:
    """Config with tuples as lists, for JSON."""
    return {s: {k: list(v) if isinstance(v, tuple) else v for k, v in f.items()} for s, f in config.items()}
