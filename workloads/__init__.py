"""Bundled Flax workloads that `advisor run-workload` profiles (installed as `advisor.workloads`)."""

from __future__ import annotations

from . import config
from .config import ConfigError


def _module(name: str):
    # Imported lazily: each pulls in flax and optax.
    if name == "transformer":
        from . import transformer as module
    elif name == "mlp":
        from . import mlp as module
    else:
        raise ConfigError(f"unknown workload {name!r}; valid workloads: {', '.join(NAMES)}")
    return module


NAMES = ("transformer", "mlp")


def get(name: str):
    """The workload module: SCHEMA, PRESETS, build(config)."""
    return _module(name)


def remedy_config(name: str, remedy, config: dict) -> dict:
    """The config change that applies `remedy` (an advisor.remedies.Remedy) to this workload; {} if none."""
    return _module(name).remedy_config(remedy, config)


def resolve(name: str, preset: str, overrides) -> dict:
    module = _module(name)
    resolved = config.resolve(module.SCHEMA, module.PRESETS, preset, overrides)
    module.validate(resolved)
    return resolved
