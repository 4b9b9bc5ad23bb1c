"""The MLP's config surface: schema, presets, validation and remedy keys (no jax here; `mlp.py`
builds the model)."""

from __future__ import annotations

from . import config as cfg
from . import parallel
from .remedy_keys import shared_remedy_config

DTYPES = ("float32", "bfloat16", "float16")

SCHEMA = {
    "data": {
        "batch_size": cfg.Field(512, cfg.parse_int, "examples per step"),
        "num_inputs": cfg.Field(128, cfg.parse_int, "input features"),
        "num_classes": cfg.Field(100, cfg.parse_int, "output classes"),
    },
    "model": {
        "hidden_size": cfg.Field(256, cfg.parse_int, "hidden width"),
        "num_layers": cfg.Field(1, cfg.parse_int, "hidden Dense/LayerNorm/SiLU layers"),
        "dropout_rate": cfg.Field(0.1, cfg.parse_float, "dropout rate"),
        "dtype": cfg.Field("bfloat16", cfg.parse_choice(DTYPES), "compute dtype (parameters stay float32)", DTYPES),
        "remat": cfg.Field(False, cfg.parse_bool, "rematerialize each hidden layer"),
    },
    "optimizer": {
        "learning_rate": cfg.Field(1e-3, cfg.parse_float, "Adam learning rate"),
        "num_minibatches": cfg.Field(4, cfg.parse_int, "gradient accumulation steps"),
        "accumulate": cfg.Field("scan", cfg.parse_choice(("scan", "loop")), "accumulate by lax.scan or a Python loop",
                                ("scan", "loop")),
    },
    "train": {
        "donate": cfg.Field(True, cfg.parse_bool, "donate the train state and metrics to the step"),
        "steps": cfg.Field(3, cfg.parse_int, "profiled steps"),
        "seed": cfg.Field(0, cfg.parse_int, "random seed"),
    },
    "parallel": parallel.SCHEMA,
}

PRESETS = {
    "seed": {},
    "tiny": {"model.dtype": "float32", "optimizer.num_minibatches": 1},
}


def remedy_config(remedy, config: dict) -> dict:
    """The MLP's config keys for each remedy (advisor.remedies.Kind), from the current config."""
    if getattr(remedy.kind, "value", remedy.kind) == "remat":
        return {} if config.get("model", {}).get("remat") else {"model.remat": True}
    if getattr(remedy.kind, "value", remedy.kind) == "no_remat":
        return {"model.remat": False} if config.get("model", {}).get("remat") else {}
    return shared_remedy_config(remedy, config)   # no layer scan to unroll


def validate(config: dict) -> None:
    parallel.validate(config)
    d, o = config["data"], config["optimizer"]
    if o["num_minibatches"] == 0 or d["batch_size"] % o["num_minibatches"]:
        raise cfg.ConfigError(f"data.batch_size ({d['batch_size']}) must be a multiple of "
                              f"optimizer.num_minibatches ({o['num_minibatches']})")
    if min(d["batch_size"], d["num_inputs"], d["num_classes"], config["model"]["hidden_size"]) < 1:
        raise cfg.ConfigError("data sizes and model.hidden_size must be at least 1")
