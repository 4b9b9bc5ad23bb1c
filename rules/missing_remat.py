"""missing-remat: activations saved for the backward pass fill a material share of peak memory.

## What it does
Looks at the buffers live at the training step's memory peak (XLA's buffer assignment, as
xprof's memory viewer shows it) and picks the activations by what they are: temporaries
the forward pass produced for the backward pass to read (not gradients, optimizer updates or
the backward pass's own intermediates), of any rank (2-D `[batch, features]` activations of
MLPs count). When the step uses no rematerialization it estimates what remat would free for
the program's structure:

- layers in a scan (`nn.scan`, `lax.scan`): remat inside the scan keeps each block's input
  (the narrowest activations) and one layer's activations while they are recomputed;
- layers unrolled (a Python loop): remat alone often frees nothing, because XLA schedules
  the recomputation early (the bundled Transformer, unrolled: 98.5 -> 98.5 MiB measured by
  `--verify`); the rule recommends remat inside a scan over the layers and estimates that
  (layers counted from the op names' indexed module scopes, Linen's `Block_0`, `Block_1`, ... or
  explicit `block_0`, ...; without module names, as in NNX lists of modules and pure-JAX or
  Equinox-style pytrees of layers, from the buffers each source line and op produces once per
  layer; the same Transformer verified 98.5 -> 39.9 MiB against an estimate of about 36.6 MiB);
- layers unrolled whose shapes differ (a CNN whose stages change channels): they cannot be
  stacked into a scan, so the rule recommends remat of the blocks where they are, to be checked
  on the compiled step (`advisor.verify`).

It fires when the saving is a material share of peak memory.

## Why is this bad?
Without remat, every intermediate of every layer stays alive from the forward pass until
its gradient is computed. They usually dominate memory (the tutorial: float32 MLP
activations of all 12 layers, `f32[12,16,512,4096]`), which caps batch size and model size
and forces gradient accumulation. Remat costs work (one more forward pass of the rematted
blocks: about a third of the step's matmul FLOPs, stated with the time they take at the step's
measured rate), though not always step time: on a GPU the activations it no longer stores and
reads back can repay it (the seed Transformer on one H100 ran x0.77 with remat, measured by
`--verify`). So it is a `warning` only under memory pressure (peak at least half of the
device's capacity, or of `--device-memory` / `--memory-limit`), and otherwise `info` saying
what the memory would buy.

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
(e.g. `jax.checkpoint_policies.dots_saveable`) trades in between. With unrolled layers,
scan over them with the remat inside (`nn.scan(nn.remat(Block))`, `nnx.scan` + `nnx.remat`).

## Options
- `min_share` (default 0.2): fire when remat would save at least this share of peak memory.
- `min_bytes` (default 16 MiB): ignore peaks too small to matter.
"""

from __future__ import annotations

from advisor.message import Message
from advisor.model import Profile
from advisor.remedies import Kind, Remedy, severity
from advisor.rule import Rule
from advisor.units import flop, ms
from advisor.views import ops as ops_view
from advisor.views.activations import activations, is_training_step
from advisor.views.layers import heterogeneous_layers, layers_in, source_of

from ._common import kept_by_remat, measured_by

MESSAGE = Message(      # the layers in a scan
    title="no remat: activations are {share_of_peak:pct} of peak memory ({activations:mib} of {peak:mib}); remat "
          "would free about {saving:mib}",
    bundled="rematerialize the large blocks (Flax: nn.remat(Block, prevent_cse=False); the bundled Transformer: "
            "remat=MLP+Attn)",
    buys=True,
    metric="peak_memory",
    gain="about {saving:mib} less peak memory (from {peak:mib} to about {after:mib}): the activations at peak less "
         "the block inputs remat keeps and one layer's recomputed activations",
    cost="{recompute}",
)
# unrolled layers of different shapes: they cannot be stacked into a scan
MIXED = MESSAGE.but(fix="{advice}; the layers differ in shape, so they cannot be stacked into a scan: remat each block "
                        "where it is, and check the compiled peak (advisor.verify), as XLA may schedule an unrolled "
                        "model's recomputation early and free less")
# unrolled layers of one shape: remat inside a scan
UNROLLED = MESSAGE.but(
    bundled="scan over the layers with the blocks rematted inside (scan_layers=true, remat=MLP+Attn): unrolled, XLA "
            "schedules the recomputation early and remat alone frees nothing",
    gain=MESSAGE.gain + ", with the layers in a scan",
    cost="{recompute}; scanning adds stacking copies of the block inputs",
)


def scanned(profile: Profile, acts) -> bool:
    """The layers run in a scan: a loop body stacks buffers shaped like the activations."""
    module = profile.modules[profile.step_module]
    shapes = {b.shape for b in acts}
    return any(i.shape in shapes for i in module.instructions.in_loops("dynamic-update-slice"))


def estimate(profile: Profile, acts, in_scan: bool) -> int:
    """What remat inside a scan frees: the activations less the block inputs it keeps and one
    layer's activations while they are recomputed."""
    act_bytes = sum(b.bytes for b in acts)
    kept = kept_by_remat(acts)
    one_layer = (act_bytes - kept) / layers_in(acts, in_scan, profile)
    return int(max(act_bytes - kept - one_layer, 0))


def check(profile: Profile, min_share: float = 0.2, min_bytes: int = 16 * 1024 * 1024):
    memory, module = profile.memory, profile.modules.get(profile.step_module or "")
    if memory is None or module is None or module.has_remat or not is_training_step(profile):
        return
    acts = activations(profile, saved_only=True)
    act_bytes = sum(b.bytes for b in acts)
    if memory.peak_bytes < min_bytes or not acts:
        return
    in_scan = scanned(profile, acts)
    mixed = not in_scan and heterogeneous_layers(profile)   # layers of different shapes: no scan
    saving = estimate(profile, acts, in_scan)
    share = saving / memory.peak_bytes
    if share < min_share:
        return
    largest = sorted(acts, key=lambda b: -b.bytes)[:5]
    remedy = Remedy(Kind.REMAT, "blocks" if in_scan or mixed else "scanned_blocks")
    yield RULE.finding(
        profile, message=MESSAGE if in_scan else MIXED if mixed else UNROLLED, remedy=remedy,
        severity=severity(profile, remedy, share, RULE.severity), impact=share, source=source_of(profile, largest),
        share_of_peak=act_bytes / memory.peak_bytes, activations=act_bytes, peak=memory.peak_bytes, saving=saving,
        after=memory.peak_bytes - saving, recompute=recompute_cost(profile),
        evidence={
            "activation_bytes": act_bytes,
            "peak_bytes": memory.peak_bytes,
            "share_of_peak": round(act_bytes / memory.peak_bytes, 4),
            "estimated_saving_bytes": saving,
            "layers": "scan" if in_scan else "unrolled, layers of different shapes" if mixed else "unrolled",
            "largest_activations": [{"shape": b.shape, "bytes": b.bytes, "instruction": b.instruction}
                                    for b in largest],
            "module": memory.module,
        })


def recompute_cost(profile: Profile) -> str:
    """What remat costs, as work: the blocks' forward pass again, about a third of the step's matmul
    FLOPs (forward 1, backward 2) at the step's measured matmul rate; not promised as step time, which
    remat can also lower by saving the activations' traffic (measured, not estimated)."""
    text = "the rematted blocks' forward pass runs again during the backward pass"
    ops = ops_view.of(profile)
    if ops is None:
        return text + f" (more work; {measured_by(profile, '--verify')} measures the step time)"
    per = max(ops.steps, 1)
    flops = sum(r.flops for r in ops.rows if r.matmul and r.flops) / per
    time = sum(r.time_ns for r in ops.rows if r.matmul and r.flops) / per
    if not flops or not time:
        return text + f" (more work; {measured_by(profile, '--verify')} measures the step time)"
    text += (f": about {flop(flops / 3)} per step recomputed, a third of the step's {flop(flops)} of matmuls "
             f"(forward 1, backward 2), {ms(time / 3)} at the step's measured matmul rate if nothing else changed")
    if profile.backend in ("gpu", "tpu"):
        text += ("; on a GPU the activations it no longer writes and reads back can repay that (the seed "
                 "Transformer on one H100: step x0.77 with remat of MLP and attention, measured by --verify): "
                 f"{measured_by(profile, 'run-workload --verify')} measures it")
    else:
        text += f"; {measured_by(profile, 'run-workload --verify')} measures the step time"
    return text


RULE = Rule(
    id="missing-remat",
    severity="warning",
    backends=("cpu", "gpu", "tpu"),
    summary="no rematerialization while remat would free a material share of peak memory",
    check=check,
    message=MESSAGE,
    needs=("hlo", "buffers"),
    doc=__doc__,
)
