"""scan-dynamic-update-slice: stacking per-layer residuals in a scan costs step time.

## What it does
Measures the self time of `dynamic-update-slice` ops (and fusions that contain one) that
run inside a `while` loop body, plus the zero-fill and copies of the stacked buffers they
write (ops outside the loop with the same shape), as a share of the step's op time.

## Why is this bad?
`jax.lax.scan` / `flax.linen.scan` over layers writes every layer's saved activations into
stacked `[num_layers, ...]` buffers, one `dynamic-update-slice` per residual per layer, and
reads them back with `dynamic-slice` in the backward loop. With few, large layers these
copies show up as gaps between the layers' matmuls (the tutorial measured 1.1 s -> 0.73 s per
step by unrolling 12 layers). It does not matter when the copies are a small share, e.g. with
remat inside the scan, which leaves only each block's input to stack.

## Example
```python
x, _ = nn.scan(lambda m, c, _: (m(c), None), variable_axes={"params": 0},
               split_rngs={"params": True}, length=num_layers)(Block(), x, ())
```

Stacked weight gradients (the backward loop writes each layer's parameter gradient into a
`[num_layers, ...]` buffer shaped like the stacked parameters) are not activations and are
left out: unrolling or remat would not remove them. When the blocks are already rematted
inside the scan, the rule does not advise remat again.

A scan over time (an RNN: `nn.RNN`, `lax.scan` of a cell over the sequence) stacks each time
step's state in the same way; there the layers are not what is scanned (the updated parameters
are not stacked along the scan), so unrolling is not advised: remat of the cell
(`nn.remat(nn.GRUCell)`, `jax.checkpoint` on the step function) stacks only the carried state,
at the cost of recomputing the cell in the backward pass, or nothing is to be done.

## Use instead
Unroll shallow models (`scan_layers=False`: a Python loop over layers), or remat the blocks
inside the scan (`nn.remat(Block)`), which stacks only each block's input. Unrolling costs
compile time that grows with the layer count; remat costs one extra forward of the blocks.

A pipeline's schedule loop (a `fori_loop` over M + S - 1 iterations passing activations
stage to stage with a `ppermute` ring, see the parallelism view) is not a layer stack: unrolling
it is not the lever. There the advice is to remat the stage step inside the loop
(`jax.checkpoint` around the stage function), which stacks only each iteration's stage input.
Times are per device: on a run of several devices, the ops' time is divided by the devices
that ran them.

## Options
- `min_share` (default 0.05): fire when the dynamic-update-slices alone take at least this share of op time,
- `min_total_share` (default 0.10): or when they and the stacked buffers' fill and copies take at least this.
"""

from __future__ import annotations

from advisor.categories import categorize
from advisor.message import Message, fill
from advisor.model import Profile
from advisor.remedies import Kind, Remedy, config_for, severity
from advisor.rule import Rule
from advisor.units import ms
from advisor.views import parallelism, step_time
from advisor.views.layers import stacking_copies
from advisor.views.step_time import per_step

from ._common import bundled_config, dims, measured_by

UNROLL_MAX_LAYERS = 16   # beyond this, unrolling's compile time usually outweighs the copies

_TITLE = "scan stacking copies take {share:pct} of op time ({saving:ms} per step{split}): dynamic-update-slice into "
_RECOMPUTE = (" forward runs again in the backward pass: more work (its FLOPs again), though not always more step time "
              "(fewer activations stored and read back): {measured_by} measures it")
# The gain: the stacking copies' measured time, the part of the step the fix removes for sure. What else
# unrolling changes (the loop's slices of the stacked buffers, its per-layer iterations, fusion across
# layers, a larger program) one trace cannot weigh: on a GPU it has only added to the gain (the H100
# measurement below), so the copies are a lower bound there; on a CPU a re-run has measured unrolling both
# faster and slower than that, so it is an estimate, never a bound.
_UNROLLED_GAIN = ("about {saving:ms} per step, the measured time of the stacking copies{also}; on a CPU the larger "
                  "unrolled program can also run slower, so this is an estimate: {measured_by} measures the step")
_UNROLLED_GAIN_GPU = ("at least {saving:ms} per step (a lower bound): the measured time of the stacking "
                      "copies{also}, and lets XLA fuse across layers (the tutorial's bfloat16 row on one H100: "
                      "201 -> 115 ms per step unrolled, where the copies took 31.7 ms)")
MESSAGE = Message(      # a shallow model's layers in a scan: unroll them (or remat inside the scan)
    title=_TITLE + "stacked per-layer buffers",
    bundled="unroll the layers (scan_layers=False) for a shallow model, or remat the blocks inside the scan "
            "(remat=MLP+Attn) so only each block's input is stacked",
    fix="{advice}{or_remat}",
    gain=_UNROLLED_GAIN,
    cost="compile time grows with the layer count, and the HLO is larger",
)
REMATTED = MESSAGE.but(     # the blocks already rematted: unroll
    bundled="unroll the layers (scan_layers=False) for a shallow model; the blocks are already rematted, so what is "
            "stacked is each block's input",
    fix="{advice}",
)
DEEP = MESSAGE.but(         # too many layers to unroll cheaply: remat inside the scan
    bundled="remat the blocks inside the scan (remat=MLP+Attn): {layers} layers are too many to unroll cheaply",
    fix="{advice}",
    gain="up to {saving:ms} per step, the measured time of the stacking copies",
    cost="the blocks'" + _RECOMPUTE,
)
OVER_TIME = DEEP.but(       # a recurrence (an RNN over time steps): there are no layers to unroll
    title=_TITLE + "stacked per-time-step buffers",
    bundled="the scan runs over time (a recurrence), not over layers: unrolling it is not the lever",
    fix="the scan runs over time (a recurrence), not over layers, so unrolling is not the lever: {advice}; what is "
        "stacked is then the carried state of each time step",
    cost="the cell's" + _RECOMPUTE,
)
IN_SCHEDULE = DEEP.but(     # the pipeline's schedule loop, not a layer stack
    title=_TITLE + "stacked per-iteration buffers of the pipeline schedule loop",
    bundled="remat the stage step inside the pipeline's schedule loop ({iterations} iterations over {stages} stages): "
            "wrap the stage function in jax.checkpoint so each iteration stacks only its stage input; the loop is the "
            "pipeline schedule, not a layer stack, so unrolling it is not the lever",
    cost="the stage step's" + _RECOMPUTE,
)
ALTERNATIVE = ("remat the blocks inside the scan (remat=MLP+Attn), so only each block's input is stacked",
               "the blocks'" + _RECOMPUTE)    # beside unrolling, for a bundled workload: (text, cost)


def check(profile: Profile, min_share: float = 0.05, min_total_share: float = 0.10):
    module = profile.step_module
    total = step_time.of(profile).step_program_op_ns
    if module is None or total <= 0:
        return
    ops = [(op, profile.instruction(op)) for op in profile.ops if op.module == module]
    # The stacked buffers are what the loop's dynamic-update-slices write; outside the loop
    # XLA zero-fills (broadcast) and copies them: the same overhead, and gone when unrolled.
    dus, fill_ops = stacking_copies(profile)
    if not dus:
        return
    dus_ns = sum(op.self_ns for op, _ in dus)
    fill_ns = sum(op.self_ns for op, _ in fill_ops)
    share = (dus_ns + fill_ns) / total
    if dus_ns / total < min_share and share < min_total_share:
        return
    dus.sort(key=lambda pair: -pair[0].self_ns)
    stacked = []
    for _, ins in dus:
        if ins.shape not in stacked:
            stacked.append(ins.shape)
    devices = max(1, len(profile.hosts[0].devices)) if profile.hosts else 1
    per_step_ns = per_step(profile, dus_ns + fill_ns) / devices    # the ops of every device are summed
    config = bundled_config(profile)
    layers = (config or {}).get("model", {}).get("num_layers")
    rematted = profile.modules[module].has_remat or bool((config or {}).get("model", {}).get("remat"))
    view = parallelism.of(profile)
    schedule = view.pipeline if view is not None else None
    in_schedule = schedule is not None and any(profile.modules[module].in_loop(ins.loop, schedule.loop)
                                               or _backward_schedule(profile.modules[module], ins.loop, schedule)
                                               for _, ins in dus)
    over_time = not in_schedule and not config and not _stacked_parameters(profile.modules[module], stacked)
    if in_schedule:
        message, remedy = IN_SCHEDULE, Remedy(Kind.REMAT, "stage")
    elif over_time:
        message, remedy = OVER_TIME, Remedy(Kind.REMAT, "cell")
    elif layers is not None and layers > UNROLL_MAX_LAYERS and not rematted:
        message, remedy = DEEP, Remedy(Kind.REMAT, "blocks")
    else:
        message, remedy = REMATTED if rematted else MESSAGE, Remedy(Kind.UNROLL_LAYERS)
        message = message.but(gain=_UNROLLED_GAIN_GPU) if profile.backend == "gpu" else message
    alternatives = []
    if remedy.kind is Kind.UNROLL_LAYERS and not rematted and config_for(profile, remedy):   # the fix's other half
        alt = config_for(profile, Remedy(Kind.REMAT, "scanned_blocks"))
        if alt:
            alternatives.append({"config": alt, "text": ALTERNATIVE[0],
                                 "cost": fill(ALTERNATIVE[1], {"measured_by": measured_by(profile, "--verify")})})
    by_category = _by_category(profile, dus + fill_ops, per_step_ns / (dus_ns + fill_ns) if dus_ns + fill_ns else 0.0)
    copies = dus + [(op, ins) for op, ins in fill_ops if ins.opcode == "copy"]
    only_fill = ({categorize(ins, op.name) for op, ins in fill_ops if ins.opcode != "copy"}
                 - {categorize(ins, op.name) for op, ins in copies})
    yield RULE.finding(
        profile, message=message, remedy=remedy, alternatives=alternatives, impact=share,
        severity=severity(profile, remedy, share, RULE.severity),
        source=next((str(i.source) for _, i in dus if i.source), None),
        share=share, saving=per_step_ns, split=_split(by_category, only_fill), layers=layers,
        iterations=schedule.iterations if schedule else None, stages=schedule.stages if schedule else None,
        or_remat="" if config else ("; or remat the blocks inside the scan (Linen `nn.scan(nn.remat(Block))`, "
                                    "NNX `nnx.remat`)"),
        also=_also(profile, ops, devices), measured_by=measured_by(profile, "--verify"),
        evidence={
            "share_of_op_time": round(share, 4),
            "time_per_step_ms": round(per_step_ns / 1e6, 3),
            "time_per_step_ms_by_category": {k: round(v / 1e6, 3) for k, v in by_category.items()},
            "dynamic_update_slice_share": round(dus_ns / total, 4),
            "stacked_buffer_fill_and_copy_share": round(fill_ns / total, 4),
            "op_time_per_step_ms": round(per_step(profile, total) / 1e6, 3),
            "ops": len(dus),
            "stacked_buffer_shapes": stacked[:8],
            "largest_stacked_buffer_bytes": max(ins.bytes for _, ins in dus),
            "module": module,
            "devices": devices,
            "pipeline_schedule_loop": in_schedule,
        })


def _also(profile: Profile, ops, devices: int) -> str:
    """What else unrolling removes: the loop's slicing of stacked buffers (measured) and its iterations."""
    slices = sum(op.self_ns for op, ins in ops if ins and ins.in_loop_body and ins.does("dynamic-slice")
                 and not ins.does("dynamic-update-slice"))
    slices_ns = per_step(profile, slices) / devices
    return (f"; unrolling also removes the loop's slicing of stacked buffers ({ms(slices_ns)} per step measured) "
            if slices_ns > 0 else "; unrolling also removes ") + "and its per-layer loop iterations"


def _by_category(profile: Profile, ops, scale: float) -> dict[str, float]:
    """The ops' time per step (ns) by the category the efficiency table puts them in."""
    out: dict[str, float] = {}
    for op, ins in ops:
        cat = categorize(ins, op.name)
        out[cat] = out.get(cat, 0.0) + op.self_ns * scale
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def _split(by_category: dict[str, float], fill_categories: set[str]) -> str:
    """Where the time sits in the category table, when it spans more than one category (so the figure
    can exceed the copy/dynamic-update-slice category's own): the zero-fill of the stacked buffers is
    a broadcast fusion."""
    if len(by_category) < 2:
        return ""
    return ": " + ", ".join(f"{ms(ns)} in {cat}" + (" (the zero-fill of the stacked buffers)" if cat in fill_categories
                                                     else "") for cat, ns in by_category.items())


def _backward_schedule(module, loop: str, schedule) -> bool:
    """A backward loop with the schedule's trip count: the pipeline's transpose."""
    info = module.loops.get(loop)
    return info is not None and info.backward and info.trip_count == schedule.iterations


def _stacked_parameters(module, stacked_shapes) -> bool:
    """A scan over layers slices stacked parameters: some of the train state the step updates has the
    stacked buffers' leading dimension (the trip count). A scan over time steps reuses the same
    weights each step and stacks the input sequence instead."""
    leads = {dims(shape)[0] for shape in stacked_shapes if dims(shape)}
    return any(len(d) >= 2 and d[0] in leads
               for n, d in module.parameter_dims.items() if n in module.updated_parameters)


RULE = Rule(
    id="scan-dynamic-update-slice",
    severity="warning",
    backends=("cpu", "gpu", "tpu"),
    summary="dynamic-update-slice copies inside scan (while) bodies take a material share of op time",
    check=check,
    message=MESSAGE,
    needs=("hlo",),
    doc=__doc__,
)
