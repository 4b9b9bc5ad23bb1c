"""What a recommendation changes, typed: the remedy, its cost, and how it reads for the user.

Rules name a `Remedy` (remat the blocks, unroll the layers, donate the state, ...). A bundled
workload maps each remedy to its own config keys (`workloads.<name>.remedy_config`); pre-flight
and `--verify` read that map. For the user's own code the remedy is spelled in Flax Linen / NNX
terms. The cost-aware severity policy every rule applies lives here too.
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Any, Optional

from .model import Profile
from .settings import device_capacity
from .units import mib


class Kind(str, enum.Enum):
    REMAT = "remat"
    UNROLL_LAYERS = "unroll_layers"
    SCAN_LAYERS = "scan_layers"
    DONATE = "donate"
    BFLOAT16 = "bfloat16"
    MORE_MINIBATCHES = "more_minibatches"
    FEWER_MINIBATCHES = "fewer_minibatches"
    SMALLER_BATCH = "smaller_batch"
    FSDP = "fsdp"
    MORE_MICROBATCHES = "more_microbatches"     # a pipeline's microbatches (not gradient accumulation's)
    NO_REMAT = "no_remat"                       # drop remat ("unrolled": and unroll the layers' scan)
    FUSED_ATTENTION = "fused_attention"         # a fused attention kernel instead of materialized scores


@dataclasses.dataclass(frozen=True)
class Remedy:
    kind: Kind
    target: Optional[str] = None     # what it applies to: "blocks", "block", "sub_blocks", "state"
    value: Any = None                # a number where the remedy has one (minibatches)

    def to_json(self) -> dict:
        out: dict[str, Any] = {"kind": self.kind.value}
        if self.target is not None:
            out["target"] = self.target
        if self.value is not None:
            out["value"] = self.value
        return out


# Fixes that cost step time or numerics: advised as warnings only under memory pressure.
COSTLY = frozenset({Kind.REMAT, Kind.BFLOAT16, Kind.MORE_MINIBATCHES, Kind.SMALLER_BATCH, Kind.FSDP})
# Fixes that change what the model computes (verify does not expect the same loss).
CHANGES_NUMERICS = frozenset({Kind.BFLOAT16})
# Fixes known not to help on a backend: no config change is recommended there.
UNHELPFUL = {"cpu": frozenset({Kind.BFLOAT16})}
PRESSURE = 0.5          # peak at least this share of a known capacity
MATERIAL_SHARE = 0.1    # a free fix is a warning from this share of peak memory...
MATERIAL_BYTES = 16 * 1024 * 1024   # ...and this many bytes: a few MiB matter on no device


def helps_on(remedy: Remedy, backend: str) -> bool:
    return remedy.kind not in UNHELPFUL.get(backend, frozenset())


def memory_pressure(profile: Profile) -> Optional[bool]:
    """Peak at least half of the known capacity (the device's, or --memory-limit / --device-memory); None: unknown."""
    capacity = device_capacity(profile)
    if not capacity or profile.memory is None:
        return None
    return profile.memory.peak_bytes >= PRESSURE * capacity


def severity(profile: Profile, remedy: Remedy, share: float, default: str = "warning",
             saving_bytes: Optional[int] = None) -> str:
    """One policy for every rule.

    A costly fix (remat, bfloat16, more minibatches) is a warning only under memory pressure,
    else info; a free fix (donation, unrolling) keeps the rule's severity when it is a material
    share (10% or more; and, for memory, 16 MiB or more), else info; a fix that does not help
    on this backend is info.
    """
    if not helps_on(remedy, profile.backend):
        return "info"
    if remedy.kind in COSTLY:
        return default if memory_pressure(profile) else "info"
    material = share >= MATERIAL_SHARE and (saving_bytes is None or saving_bytes >= MATERIAL_BYTES)
    return default if material else "info"


def buys(profile: Profile, saving: int) -> str:
    """What freed memory would buy, said where the fix is not needed (no memory pressure)."""
    capacity = device_capacity(profile)
    peak = profile.memory.peak_bytes if profile.memory else 0
    where = (f"the peak is {peak / capacity:.0%} of the {mib(capacity)} capacity"
             if capacity and peak else "no device capacity is known; pass --device-memory")
    share = f" ({saving / peak:.0%} of peak)" if peak else ""
    return (f"no memory pressure ({where}): worth it only to make room for a larger batch or model, "
            f"with about {mib(saving)}{share} freed")


def config_for(profile: Profile, remedy: Remedy) -> dict:
    """The bundled workload's config change for `remedy`; {} for the user's own code or an unhelpful fix."""
    meta = profile.run_metadata
    name, config = meta.get("workload"), meta.get("config")
    if not name or not isinstance(config, dict) or not helps_on(remedy, profile.backend):
        return {}
    from advisor import workloads
    try:
        return workloads.remedy_config(name, remedy, config) or {}
    except Exception:  # noqa: BLE001 - an unknown workload or config shape: no config change, the text stands
        return {}


USER_TERMS = {
    (Kind.REMAT, None): "wrap the large blocks in remat: Linen `nn.remat(Block, prevent_cse=False)`, NNX "
                        "`nnx.remat(block_fn)`, plain JAX `jax.checkpoint(block_fn)`",
    (Kind.REMAT, "scanned_blocks"): "scan over the layers with the blocks rematted inside: Linen "
                                    "`nn.scan(nn.remat(Block, prevent_cse=False), ...)`, NNX `nnx.scan` over "
                                    "`nnx.remat(block_fn)`, plain JAX `jax.lax.scan(jax.checkpoint(layer), ...)`; "
                                    "remat in an unrolled loop often frees nothing (XLA schedules the recomputation "
                                    "early)",
    (Kind.REMAT, "cell"): "remat the recurrent cell so each time step stacks only its carried state: Linen "
                          "`nn.RNN(nn.remat(nn.GRUCell)(...))`, NNX `nnx.remat` on the cell, plain JAX "
                          "`jax.lax.scan(jax.checkpoint(step), ...)`; or leave it, if the step time it costs "
                          "matters more than the copies",
    (Kind.REMAT, "sub_blocks"): "remat the sub-blocks (e.g. MLP and attention) instead of the whole block: "
                                "Linen `nn.remat(MLP)`, NNX `nnx.remat`, plain JAX `jax.checkpoint` on each part",
    (Kind.REMAT, "stage"): "remat the stage step inside the pipeline's schedule loop: `jax.checkpoint(stage_fn)` "
                           "around the stage function the loop body calls (Linen `nn.remat(Stage)`), so each "
                           "iteration stacks only its stage input; the loop is the pipeline schedule, not a layer "
                           "stack, so unrolling it is not the lever",
    (Kind.UNROLL_LAYERS, None): "unroll the layers: a Python loop over the blocks instead of Linen `nn.scan` / "
                                "NNX `nnx.scan` / `jax.lax.scan` (or `unroll=` on the scan)",
    (Kind.NO_REMAT, None): "drop remat: call the blocks without `nn.remat` / `nnx.remat` / `jax.checkpoint`",
    (Kind.NO_REMAT, "unrolled"): "drop remat and unroll the layers together: a Python loop over the blocks, "
                                 "without `nn.remat` / `nnx.remat` / `jax.checkpoint` and without `nn.scan` / "
                                 "`nnx.scan` / `jax.lax.scan` (dropping remat alone inside a scan stacks every "
                                 "layer's activations with copies, and can be slower)",
    (Kind.FUSED_ATTENTION, None): "use a fused attention that never materializes the scores: "
                                  "`jax.nn.dot_product_attention(q, k, v, is_causal=..., implementation='cudnn')` "
                                  "on NVIDIA GPUs (q, k, v as [batch, seq, heads, head_dim])",
    (Kind.SCAN_LAYERS, None): "scan over the layers: Linen `nn.scan`, NNX `nnx.scan`, or `jax.lax.scan` over "
                              "stacked parameters",
    (Kind.DONATE, None): "donate the arguments that hold the train state (those the step returns updated: the "
                         "parameters, the optimizer state, batch statistics) by name, `jax.jit(train_step, "
                         "donate_argnames=(...))` (NNX: `nnx.jit`), and do not reuse them after the call",
    (Kind.BFLOAT16, None): "compute in bfloat16: Linen `nn.Dense(..., dtype=jnp.bfloat16)`, NNX "
                           "`nnx.Linear(..., dtype=jnp.bfloat16)`, keeping `param_dtype` float32",
    (Kind.BFLOAT16, "attention_logits"): "use a fused attention that does not store the scores "
                                         "(`jax.nn.dot_product_attention`, implementation='cudnn' on GPU), or "
                                         "compute the logits in bfloat16",
    (Kind.MORE_MINIBATCHES, None): "accumulate gradients over more, smaller minibatches "
                                   "(`optax.MultiSteps`, or a `jax.lax.scan` over minibatch slices)",
    (Kind.MORE_MICROBATCHES, None): "split the batch into more pipeline microbatches",
    (Kind.FEWER_MINIBATCHES, None): "accumulate over fewer minibatches (1 if the batch fits): one "
                                    "forward/backward pass instead of several",
    (Kind.SMALLER_BATCH, None): "use a smaller batch",
    (Kind.FSDP, "data_axis"): "shard the parameters and optimizer state over the data axis too, keeping their "
                              "model-axis split (FSDP over data: add the data axis to the weights' PartitionSpec and "
                              "all-gather them over it before use, as Part 5 does)",
    (Kind.FSDP, None): "shard parameters and optimizer state over devices (FSDP: `jax.sharding` with a "
                       "`NamedSharding` over the data axis)",
}


def user_terms(remedy: Remedy, source: Optional[str] = None) -> str:
    text = USER_TERMS.get((remedy.kind, remedy.target)) or USER_TERMS[(remedy.kind, None)]
    return f"{text} (at {source})" if source else text


def advice(profile: Profile, remedy: Remedy, workload_text: str, source: Optional[str] = None) -> tuple[str, dict]:
    """(text, config): the bundled workload's wording and `--set` change, or the user's Flax/JAX terms."""
    if profile.run_metadata.get("workload"):
        return workload_text, config_for(profile, remedy)
    return user_terms(remedy, source), {}
