"""The Transformer's config surface: schema, presets, validation and remedy keys (no jax here, so
`advisor analyze` and the rules read them without importing flax; `transformer.py` builds the model)."""

from __future__ import annotations

from . import config as cfg
from . import parallel
from .remedy_keys import shared_remedy_config

REMAT_CHOICES = ("MLP", "Attn", "Block")
DTYPES = ("float32", "bfloat16", "float16")

SCHEMA = {
    "data": {
        "batch_size": cfg.Field(64, cfg.parse_int, "sequences per step"),
        "seq_len": cfg.Field(512, cfg.parse_int, "tokens per sequence"),
        "vocab_size": cfg.Field(2048, cfg.parse_int, "vocabulary size"),
    },
    "model": {
        "hidden_size": cfg.Field(1024, cfg.parse_int, "model width"),
        "num_layers": cfg.Field(12, cfg.parse_int, "Transformer blocks"),
        "head_dim": cfg.Field(128, cfg.parse_int, "width of one attention head; num_heads = hidden_size // head_dim"),
        "mlp_expansion": cfg.Field(4, cfg.parse_int, "MLP hidden width as a multiple of hidden_size"),
        "dropout_rate": cfg.Field(0.1, cfg.parse_float, "dropout rate"),
        "dtype": cfg.Field("bfloat16", cfg.parse_choice(DTYPES), "compute dtype (parameters stay float32)", DTYPES),
        "softmax_dtype": cfg.Field("float32", cfg.parse_choice(DTYPES), "dtype of attention logits and softmax",
                                   DTYPES),
        "causal_mask": cfg.Field(True, cfg.parse_bool, "causal attention mask"),
        "scan_layers": cfg.Field(True, cfg.parse_bool, "run the layers with nn.scan (else unrolled)"),
        "remat": cfg.Field(("MLP", "Attn"), cfg.parse_subset(REMAT_CHOICES),
                           "modules to rematerialize: MLP, Attn, Block, joined by '+' (MLP+Attn); none for no remat",
                           REMAT_CHOICES),
    },
    "optimizer": {
        "learning_rate": cfg.Field(4e-4, cfg.parse_float, "peak learning rate (warmup + exponential decay)"),
        "num_minibatches": cfg.Field(4, cfg.parse_int, "gradient accumulation steps"),
        "accumulate": cfg.Field("scan", cfg.parse_choice(("scan", "loop")), "accumulate by lax.scan or a Python loop",
                                ("scan", "loop")),
    },
    "train": {
        "donate": cfg.Field(True, cfg.parse_bool, "donate the train state and metrics to the step"),
        "steps": cfg.Field(3, cfg.parse_int, "profiled steps"),
        "seed": cfg.Field(42, cfg.parse_int, "random seed"),
    },
    "parallel": {**parallel.SCHEMA, **parallel.TENSOR_SCHEMA, **parallel.PIPELINE_SCHEMA},
}

# `seed` is the tutorial's exact configuration; `tiny` its float32 / scan / no-remat start at CPU scale.
PRESETS = {
    "seed": {},
    "tiny": {
        "data.batch_size": 8, "data.seq_len": 128, "data.vocab_size": 512,
        "model.hidden_size": 128, "model.num_layers": 4, "model.head_dim": 32,
        "model.dtype": "float32", "model.remat": (), "optimizer.num_minibatches": 1,
    },
    "small": {
        "data.batch_size": 16, "data.seq_len": 256, "data.vocab_size": 1024,
        "model.hidden_size": 256, "model.num_layers": 6, "model.head_dim": 64,
        "model.dtype": "float32", "model.remat": (), "optimizer.num_minibatches": 1,
    },
}


def remedy_config(remedy, config: dict) -> dict:
    """The Transformer's config keys for each remedy (advisor.remedies.Kind), from the current config."""
    kind = getattr(remedy.kind, "value", remedy.kind)
    m = config.get("model", {})
    if kind == "remat":   # "blocks": add remat where there is none; "sub_blocks" / "block": that granularity
        if remedy.target == "scanned_blocks":
            change = {} if m.get("scan_layers", True) else {"model.scan_layers": True}
            return change if m.get("remat") else {**change, "model.remat": ["MLP", "Attn"]}
        if remedy.target in (None, "blocks"):
            return {} if m.get("remat") else {"model.remat": ["MLP", "Attn"]}
        target = ["Block"] if remedy.target == "block" else ["MLP", "Attn"]
        return {} if list(m.get("remat") or ()) == target else {"model.remat": target}
    if kind == "unroll_layers":
        return {"model.scan_layers": False} if m.get("scan_layers", True) else {}
    if kind == "scan_layers":
        return {} if m.get("scan_layers", True) else {"model.scan_layers": True}
    if kind == "no_remat":    # "unrolled": both together (without remat a scan stacks every activation)
        change = {"model.scan_layers": False} if remedy.target == "unrolled" and m.get("scan_layers", True) else {}
        return {**change, "model.remat": ()} if m.get("remat") else change
    if kind == "bfloat16" and remedy.target == "attention_logits":
        return {"model.softmax_dtype": "bfloat16"} if m.get("softmax_dtype") != "bfloat16" else {}
    return shared_remedy_config(remedy, config)


def validate(config: dict) -> None:
    parallel.validate(config)
    m, d, o = config["model"], config["data"], config["optimizer"]
    if m["head_dim"] == 0 or m["hidden_size"] % m["head_dim"]:
        raise cfg.ConfigError(f"model.hidden_size ({m['hidden_size']}) must be a multiple of "
                              f"model.head_dim ({m['head_dim']})")
    if o["num_minibatches"] == 0 or d["batch_size"] % o["num_minibatches"]:
        raise cfg.ConfigError(f"data.batch_size ({d['batch_size']}) must be a multiple of "
                              f"optimizer.num_minibatches ({o['num_minibatches']})")
    for key in ("batch_size", "seq_len", "vocab_size"):
        if d[key] < 1:
            raise cfg.ConfigError(f"data.{key} must be at least 1")
    if m["num_layers"] < 1 or m["hidden_size"] < 1:
        raise cfg.ConfigError("model.num_layers and model.hidden_size must be at least 1")
