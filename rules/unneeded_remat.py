"""unneeded-remat: remat (and the layer scan it sits in) costs step time the device's memory does not require.

## What it does
On a GPU training step that rematerializes (`nn.remat`, `jax.checkpoint`), with the device's
memory capacity known, it measures what remat and the layer scan cost per step: the self time of
the ops JAX marks as recomputed (`rematted_computation` in their op names; their matmul FLOPs and
the time those take at the step's measured matmul rate), and the scan's stacking copies (the
`dynamic-update-slice`s into stacked per-layer buffers, their zero-fills and copies). It
estimates the peak memory of the same step unrolled without remat: today's peak plus what the
recomputed ops write, once per layer of one pass (the activations remat frees and the backward
pass would read back instead). It fires when that estimate fits the device with a margin and the
recomputation and copies are a material share of op time.

## Why is this bad?
Remat trades compute for memory, and a scan over layers trades copies for a smaller program.
Where the step uses a small share of the device's memory, the trade buys nothing: the step pays
the recomputation (about one more forward pass of the rematted blocks) and the copies for memory
it does not need. Dropping remat alone inside a scan is not the fix: the scan then stacks every
layer's activations with `dynamic-update-slice` copies. Measured on one NVIDIA H100 with the
bundled seed Transformer (bfloat16, scan, remat of MLP and attention, 4 minibatches; the trace
`fixtures/h100-traces/transformer_seed`): 153.9 ms per step as recorded, 114.5 ms unrolled without
remat (peak about 9.1 GB), 201 ms with the scan kept and remat removed.

## Example
```python
x, _ = nn.scan(nn.remat(Block, prevent_cse=False), variable_axes={"params": 0},
               split_rngs={"params": True}, length=12)(config)(x, None)
```

## Use instead
```python
for i in range(12):          # unrolled, no remat: the step holds every layer's activations
    x = Block(config, name=f"block_{i}")(x)
```
Gain: about the recomputed ops' and the stacking copies' measured time per step. Cost: the peak
memory the activations take (the finding's estimate; `advisor run-workload` and
`analyze --compile-check` compile the change for a bundled workload), and compile time that grows
with the layer count. For a bundled workload `advisor tune` measures the combinations.

## Options
- `margin` (default 0.2): leave this share of device memory free.
- `min_share` (default 0.05): fire when the recomputation and copies take at least this share of op time.
- `capacity_bytes` (default: the trace's): the device's memory.

## Note
GPU only: on a CPU there is no capacity to judge against, and remat has measured faster there
(the tiny Transformer on 2 CPU cores: x0.75 with remat, x1.13 unrolled, measured by `advisor sweep`
for issue 38). Silent where memory is tight: the estimate
must fit under the capacity less the margin.
"""

from __future__ import annotations

import math
from typing import Optional

from advisor.load.element_types import ELEMENT_TYPES
from advisor.message import Message
from advisor.model import Instruction, Profile
from advisor.remedies import Kind, Remedy, severity
from advisor.rule import Rule
from advisor.settings import device_capacity
from advisor.units import flop, ms, pct, si
from advisor.views import ops as ops_view
from advisor.views.activations import is_training_step, weight_shaped
from advisor.views.layers import stacking_copies
from advisor.views.step_time import per_step

from ._common import bundled_config

_BITS = {name: bits for name, bits in ELEMENT_TYPES.values()}
H100_SEED = ("on one H100 the bundled seed Transformer went 153.9 -> 114.5 ms per step unrolled without remat "
             "(the scan kept without remat: 201 ms)")
MESSAGE = Message(      # the layers unrolled
    title="remat{scan} cost {saving:ms} per step ({share:pct} of op time) while the step uses {used} of device memory "
          "({peak:mib} of {capacity:mib})",
    bundled="drop remat (remat=none): the step's memory does not need it",
    fix="{advice}; {measures}",
    gain="about {saving:ms} less per step: the recomputed ops take {remat:ms} per step measured "
         "({remat_matmuls:ms} of it in matmuls{work}){copies}; " + H100_SEED,
    cost="about {freed:mib} more peak memory: about {need:mib} of {capacity:mib} (estimated from this trace: today's "
         "peak plus what the recomputed ops write, once per layer{minibatches}{compiled})",
)
SCANNED = MESSAGE.but(  # the layers in a scan: without remat it stacks every layer's activations
    bundled="unroll the layers and drop remat together (scan_layers=false, remat=none): the step's memory does not "
            "need either; dropping remat alone inside the scan stacks every layer's activations with copies and can "
            "be slower",
    cost=MESSAGE.cost + "; an unrolled step compiles longer, in proportion to the layer count",
)


def array_bytes(ins: Instruction) -> int:
    """The bytes of the instruction's array (its first, for a tuple: a GEMM's workspace left out)."""
    return math.prod(ins.dims) * _BITS.get(ins.dtype, 0) // 8


def freed_per_pass(profile: Profile, rows, passes: int, executions: float) -> int:
    """What the recomputed ops write in one forward/backward pass (one minibatch): the activations remat
    frees, held until the backward pass reads them when there is no remat. Weight-shaped arrays (the
    blocks' weights cast to the compute dtype) and scalars are left out."""
    total = 0
    for r in rows:
        ins = r.instruction
        if len(ins.dims) < 2 or weight_shaped(profile, ins.shape):
            continue
        runs = ins.runs if ins.runs is not None else r.executions / max(executions, 1)   # per program execution
        total += array_bytes(ins) * runs / max(passes, 1)
    return int(total)


def check(profile: Profile, margin: float = 0.2, min_share: float = 0.05, capacity_bytes: Optional[int] = None):
    capacity = capacity_bytes or device_capacity(profile)
    memory, module = profile.memory, profile.modules.get(profile.step_module or "")
    if (profile.backend != "gpu" or not capacity or memory is None or module is None or not module.has_remat
            or not is_training_step(profile)):
        return
    view = ops_view.of(profile)
    if view is None:
        return
    steps = max(view.steps, 1)
    rows = [r for r in view.rows if r.module == profile.step_module]
    remat = [r for r in rows if r.remat]
    op_ns = sum(r.time_ns for r in rows) / steps
    remat_ns = sum(r.time_ns for r in remat) / steps
    if not remat or op_ns <= 0:
        return
    dus, fill = stacking_copies(profile)
    copies_ns = per_step(profile, sum(op.self_ns for op, _ in dus + fill)) / view.devices
    gain = remat_ns + copies_ns
    share = gain / op_ns
    if share < min_share:
        return
    passes = module.grad_accumulation_steps or 1
    freed = freed_per_pass(profile, remat, passes, view.executions)
    need = memory.peak_bytes + freed
    if need > capacity * (1 - margin):
        return
    scanned = bool(dus)
    matmuls = [r for r in rows if r.matmul and r.flops]
    rate = sum(r.flops for r in matmuls) / sum(r.time_ns for r in matmuls) * 1e9 if matmuls else 0.0
    recomputed = sum(r.flops for r in remat if r.matmul and r.flops) / steps
    remat_matmul_ns = sum(r.time_ns for r in remat if r.matmul) / steps
    remedy = Remedy(Kind.NO_REMAT, "unrolled" if scanned else None)
    workload = profile.run_metadata.get("workload")
    yield RULE.finding(
        profile, message=SCANNED if scanned else MESSAGE, remedy=remedy, impact=share,
        severity=severity(profile, remedy, share, RULE.severity), scan=" and the layer scan" if scanned else "",
        saving=gain, share=share, used=_share(memory.peak_bytes / capacity), peak=memory.peak_bytes, capacity=capacity,
        measures=(f"advisor tune {workload} measures the combinations" if workload else
                  "time both configurations (advisor.trace) before keeping it"),
        remat=remat_ns, remat_matmuls=remat_matmul_ns,
        copies=f", the scan's stacking copies {ms(copies_ns)}" if scanned else "",
        work=(f": {flop(recomputed)} of matmuls recomputed per step, {ms(recomputed / rate * 1e9)} at the step's "
              f"measured matmul rate ({si(rate, 'FLOP/s')})" if recomputed and rate else ""),
        freed=freed, need=need, minibatches=f" of one of the {passes} minibatches" if passes > 1 else "",
        compiled="; compiling the change gives XLA's figure" if bundled_config(profile) else "",
        evidence={
            "recompute_ms_per_step": round(remat_ns / 1e6, 3),
            "recompute_matmul_ms_per_step": round(remat_matmul_ns / 1e6, 3),
            "recomputed_matmul_flops_per_step": recomputed,
            "matmul_flops_per_s": rate,
            "stacking_copies_ms_per_step": round(copies_ns / 1e6, 3),
            "op_time_ms_per_step": round(op_ns / 1e6, 3),
            "share_of_op_time": round(share, 4),
            "scanned": scanned,
            "peak_bytes": memory.peak_bytes,
            "estimated_peak_without_remat_bytes": need,
            "device_capacity_bytes": int(capacity),
            "module": profile.step_module,
        })


def _share(share: float) -> str:
    return pct(share) if share >= 0.001 else "under 0.1%"


RULE = Rule(
    id="unneeded-remat",
    severity="warning",
    backends=("gpu",),
    summary="remat (and a layer scan) costs step time that the device's memory does not require",
    check=check,
    message=MESSAGE,
    needs=("hlo", "buffers", "capacity", "steps"),
    unmet_notes=(("capacity", "device memory capacity unknown (the trace does not record it): unneeded-remat "
                              "was skipped; pass --device-memory to check it"),),
    doc=__doc__,
)
