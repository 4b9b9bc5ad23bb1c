"""The bundled workloads' configs, presets and overrides."""

import jax
import pytest

from advisor import workloads
from advisor.workloads.config import ConfigError


def test_seed_preset_is_the_tutorial_model_with_155_877_376_parameters():
    config = workloads.resolve("transformer", "seed", [])
    assert config["model"]["hidden_size"] == 1024 and config["model"]["num_layers"] == 12
    assert config["model"]["remat"] == ("MLP", "Attn") and config["model"]["dtype"] == "bfloat16"
    assert config["optimizer"]["num_minibatches"] == 4 and config["train"]["donate"] is True
    built = workloads.get("transformer").build(config)
    assert built.num_params() == 155_877_376   # shape evaluation only: nothing allocated


@pytest.mark.parametrize("item, key, value", [
    ("model.scan_layers=false", ("model", "scan_layers"), False),
    ("model.remat=MLP,Attn", ("model", "remat"), ("MLP", "Attn")),
    ("model.remat=Attn,MLP", ("model", "remat"), ("MLP", "Attn")),
    ("model.remat=", ("model", "remat"), ()),
    ("model.dtype=bfloat16", ("model", "dtype"), "bfloat16"),
    ("optimizer.num_minibatches=2", ("optimizer", "num_minibatches"), 2),
    ("optimizer.learning_rate=1e-3", ("optimizer", "learning_rate"), 1e-3),
])
def test_overrides(item, key, value):
    config = workloads.resolve("transformer", "tiny", [item])
    assert config[key[0]][key[1]] == value


def test_tiny_is_the_float32_scan_no_remat_start():
    m = workloads.resolve("transformer", "tiny", [])["model"]
    assert (m["dtype"], m["scan_layers"], m["remat"]) == ("float32", True, ())


@pytest.mark.parametrize("item", ["model.nope=1", "model.num_layers=two", "model.remat=Layer",
                                  "train.donate=perhaps", "optimizer.accumulate=while"])
def test_bad_overrides_are_refused(item):
    with pytest.raises(ConfigError):
        workloads.resolve("transformer", "tiny", [item])


@pytest.mark.parametrize("overrides", [[], ["model.remat=Block", "model.scan_layers=false"],
                                       ["optimizer.num_minibatches=2", "optimizer.accumulate=loop"],
                                       ["model.dtype=bfloat16"]])
def test_transformer_step_runs_and_loss_is_finite(overrides):
    config = workloads.resolve("transformer", "tiny",
                               overrides + ["data.batch_size=4", "data.seq_len=32", "model.num_layers=2"])
    built = workloads.get("transformer").build(config)
    from advisor.workloads.train import zero_metrics
    state = built.init_state()
    mb = jax.tree_util.tree_map(lambda x: x[: x.shape[0] // config["optimizer"]["num_minibatches"]], built.batch)
    metrics = zero_metrics(built.loss_fn, state, mb)
    state, metrics = jax.jit(built.train_step)(state, metrics, built.batch)
    loss = float(metrics["loss"][0] / metrics["loss"][1])
    assert 0 < loss < 20


def test_mlp_builds_and_counts_parameters():
    config = workloads.resolve("mlp", "seed", [])
    built = workloads.get("mlp").build(config)
    # Dense 128->256, LayerNorm 256, Dense 256->100
    assert built.num_params() == 128 * 256 + 256 + 2 * 256 + 256 * 100 + 100
