"""missing-remat: activations saved for the backward pass fill most of peak memory.

## What it does
Looks at the buffers live at the training step's memory peak (XLA's buffer assignment, as
xprof's memory viewer shows it). When the step uses no rematerialization and temporaries,
the activations the forward pass keeps for the backward pass, are most of the peak, it
estimates what rematerializing the blocks would free: the activations at peak, less what
remat still keeps (each block's input, the narrowest activations) and one layer's
activations while they are recomputed (the layer count is read from the stacked buffers'
leading dimension, or the repeats of the largest shape).

## Why is this bad?
Without remat, every intermediate of every layer stays alive from the forward pass until
its gradient is computed. They usually dominate memory (the tutorial: float32 MLP
activations of all 12 layers, `f32[12,16,512,4096]`), which caps batch size and model size
and forces gradient accumulation.

## Example
```python
class Block(nn.Module):
    def __call__(self, x):
        return x + MLP()(x)
```

## Use instead
```python
        return x + nn.remat(MLP, prevent_cse=False)()(x)
```
Remat keeps only each rematted block's input and recomputes its inside in the backward
pass: about one more forward pass of those blocks per step. `jax.checkpoint` with a policy
(e.g. `jax.checkpoint_policies.dots_saveable`) trades in between.

## Options
- `min_share` (default 0.5): fire when activations are at least this share of peak memory.
- `min_bytes` (default 16 MiB): ignore peaks too small to matter.
"""

from __future__ import annotations

from advisor.findings import Expected, Finding, Recommendation
from advisor.model import Profile
from advisor.rule import Rule
from advisor.units import mib, pct

from ._common import activations, bundled_config, is_training_step, kept_by_remat, layers_in, source_of, workload


def check(profile: Profile, min_share: float = 0.5, min_bytes: int = 16 * 1024 * 1024):
    memory, module = profile.memory, profile.modules.get(profile.step_module or "")
    if memory is None or module is None or module.has_remat or not is_training_step(profile):
        return
    acts = activations(profile)
    act_bytes = sum(b.bytes for b in acts)
    if memory.peak_bytes < min_bytes or act_bytes < min_share * memory.peak_bytes:
        return
    kept = kept_by_remat(acts)
    one_layer = (act_bytes - kept) / layers_in(acts)   # recomputed one layer at a time
    saving = int(max(act_bytes - kept - one_layer, 0))
    if saving < 0.1 * memory.peak_bytes:
        return   # remat would not change much here
    largest = sorted(acts, key=lambda b: -b.bytes)[:5]
    name = workload(profile)
    change = {"model.remat": ["MLP", "Attn"]} if name == "transformer" else {"model.remat": True}
    source = source_of(profile, largest)
    yield Finding(
        rule=RULE.id,
        severity=RULE.severity,
        title=f"no remat: activations are {pct(act_bytes / memory.peak_bytes)} of peak memory "
              f"({mib(act_bytes)} of {mib(memory.peak_bytes)})",
        evidence={
            "activation_bytes": act_bytes,
            "peak_bytes": memory.peak_bytes,
            "share_of_peak": round(act_bytes / memory.peak_bytes, 4),
            "largest_activations": [{"shape": b.shape, "bytes": b.bytes, "instruction": b.instruction}
                                    for b in largest],
            "module": memory.module,
        },
        recommendation=Recommendation(
            text="rematerialize the large blocks (Flax: nn.remat(Block, prevent_cse=False); "
                 "the bundled Transformer: remat=MLP,Attn)",
            config=change if bundled_config(profile) else {},
            expected=Expected("peak_memory", saving, "bytes",
                              f"about {mib(saving)} less peak memory (from {mib(memory.peak_bytes)} to about "
                              f"{mib(memory.peak_bytes - saving)}): the activations at peak less the block "
                              f"inputs remat keeps and one layer's recomputed activations"),
            cost="the rematted blocks' forward pass runs again during the backward pass (more step time)",
        ),
        impact=act_bytes / memory.peak_bytes,
        source=source,
    )


RULE = Rule(
    id="missing-remat",
    severity="warning",
    backends=("cpu", "gpu", "tpu"),
    summary="no rematerialization while saved activations are most of peak memory",
    check=check,
    doc=__doc__,
)
