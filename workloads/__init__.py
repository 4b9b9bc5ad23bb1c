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


def resolve(name: str, preset: str, overrides) -> dict:
    module = _module(name)
    resolved = config.resolve(module.SCHEMA, module.PRESETS, preset, overrides)
    module.validate(resolved)
    return resolved
