"""Bundled Flax workloads that `advisor run-workload` profiles (installed as `advisor.workloads`)."""

from __future__ import annotations

from advisor.errors import did_you_mean

from . import config
from .config import ConfigError


def _module(name: str):
    # Imported lazily: each pulls in jax, flax and optax.
    _spec(name)
    if name == "transformer":
        from . import transformer as module
    else:
        from . import mlp as module
    return module


def _spec(name: str):
    # The config surface alone (schema, presets, validation, remedy keys): no jax.
    if name == "transformer":
        from . import transformer_spec as spec
    elif name == "mlp":
        from . import mlp_spec as spec
    else:
        raise ConfigError(f"unknown workload {name!r}; {did_you_mean(name, NAMES, 'workloads')}")
    return spec


NAMES = ("transformer", "mlp")


def get(name: str):
    """The workload module: SCHEMA, PRESETS, build(config)."""
    return _module(name)


def remedy_config(name: str, remedy, config: dict) -> dict:
    """The config change that applies `remedy` (an advisor.remedies.Remedy) to this workload; {} if none."""
    return _spec(name).remedy_config(remedy, config)


def resolve(name: str, preset: str, overrides) -> dict:
    module = _spec(name)
    resolved = config.resolve(module.SCHEMA, module.PRESETS, preset, overrides)
    module.validate(resolved)
    return resolved
