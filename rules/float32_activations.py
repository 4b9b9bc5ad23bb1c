"""float32-activations: large activations at the memory peak are float32.

## What it does
Adds up the float32 temporaries live at the step's memory peak (activations, not
parameters or optimizer state, and not attention logits, which have their own rule) and the
share of matmul/convolution time spent in float32. It fires when float32 activations are a
large share of peak memory in a program that computes its matmuls in float32.

## Why is this bad?
bfloat16 halves activation memory and, on GPUs and TPUs, runs matmuls on tensor cores/MXUs
at several times the float32 rate (the tutorial: 20.6 GB / 2.1 s -> 14.6 GB / 1.1 s per step).
Parameters and optimizer state stay float32 for stable updates. On the CPU backend the
advice is different: most CPUs compute bfloat16 slower than float32 and XLA:CPU upcasts it,
so there the rule only informs and recommends no change.

On a GPU it is also a speed fix: float32 matmuls run at the f32 rate (on NVIDIA since Ampere,
the TF32 tensor-core rate under JAX's default precision), half of bfloat16's on an H100 (494.7
against 989.4 TFLOP/s, data sheet), and memory-bound ops on bfloat16 activations move half the
bytes. The finding estimates that gain from the measured op times (the float32 matmuls at the
bfloat16 rate, the memory-bound float32 activation ops at half their time) and is a `warning`
when it is 10% of the step or more: on one H100, `--verify` measured the seed Transformer's
step at x0.60 in bfloat16. Otherwise bfloat16 changes numerics, so, like every costly fix, it is
a `warning` only under memory pressure (peak at least half of the device's capacity, or of
`--device-memory` / `--memory-limit`) and otherwise `info` saying what the memory would buy.

## Example
```python
nn.Dense(features)                      # dtype defaults to the inputs' float32
```

## Use instead
```python
nn.Dense(features, dtype=jnp.bfloat16)  # param_dtype stays float32
```

## Options
- `min_share` (default 0.3): fire when float32 activations are at least this share of peak memory,
- `min_bytes` (default 4 MiB): and at least this many.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

from advisor.message import Message
from advisor.model import Profile
from advisor.remedies import MATERIAL_SHARE, Kind, Remedy, severity
from advisor.rule import Rule
from advisor.units import ms, pct
from advisor.views import ops as ops_view
from advisor.views import peak as peak_view
from advisor.views import step_time
from advisor.views.activations import activations, parameter_shapes, requests_bfloat16
from advisor.views.layers import source_of
from advisor.views.ops import op_bound

from ._common import dtype, is_attention_logits

MESSAGE = Message(      # the gain in memory
    title="float32 activations are {share:pct} of peak memory ({bytes:mib}){matmuls}",
    bundled="compute in bfloat16 (Flax: dtype=jnp.bfloat16 on the layers), keeping parameters and optimizer state "
            "float32",
    buys=True,
    metric="peak_memory",
    gain="up to {saving:mib} less peak memory (half the float32 activations), and faster matmuls on tensor cores",
    cost="lower precision in activations (bfloat16 keeps float32's range, 8 bits of mantissa); keep "
         "softmax/normalization statistics in float32",
)
FASTER = MESSAGE.but(   # on a GPU whose peaks say bfloat16 is faster: the gain in step time
    fix="{advice}; {why}",
    buys=False,
    metric="step_time",
    saving="faster",
    gain="up to {faster:ms} per step faster ({faster_share:pct} of the step, an estimate from the measured op times: "
         "{basis}), and up to {saving:mib} less peak memory (half the float32 activations)",
)
ON_CPU = MESSAGE.but(   # bfloat16 is known not to help here: say so, recommend nothing
    bundled=None,
    fix="no change recommended on the CPU backend: XLA:CPU computes bfloat16 slower than float32 and keeps float32 "
        "buffers; on a GPU or TPU, bfloat16 compute would halve these activations",
    buys=False,
    gain="none on this backend",
    cost="none: no change recommended",
)


def _matmul_time(profile: Profile) -> tuple[float, float]:
    """(float32 matmul/conv time, all matmul/conv time) in the step program."""
    f32 = total = 0.0
    for op in profile.ops:
        if op.module != profile.step_module:
            continue
        ins = profile.instruction(op)
        if ins and ins.is_matmul:
            total += op.self_ns
            if (ins.matmul_dtype or ins.dtype) == "f32":
                f32 += op.self_ns
    return f32, total


def check(profile: Profile, min_share: float = 0.3, min_bytes: int = 4 * 1024 * 1024):
    memory = profile.memory
    if memory is None or memory.peak_bytes <= 0:
        return
    if profile.backend == "cpu" and requests_bfloat16(profile):
        return  # XLA:CPU upcasts bfloat16: the f32 buffers are its choice, not the program's
    f32 = [b for b in activations(profile) if dtype(b.shape) == "f32" and not is_attention_logits(b.shape)]
    f32_bytes = sum(b.bytes for b in f32)
    share = f32_bytes / memory.peak_bytes
    mm_f32, mm_total = _matmul_time(profile)
    if share < min_share or f32_bytes < min_bytes or (mm_total and mm_f32 / mm_total < 0.5):
        return
    cpu = profile.backend == "cpu"
    largest = sorted(f32, key=lambda b: -b.bytes)[:5]
    remedy = Remedy(Kind.BFLOAT16)
    sev = severity(profile, remedy, share, RULE.severity)
    speed = _speed(profile) if profile.backend == "gpu" else None
    if speed is not None and speed.share >= MATERIAL_SHARE:
        sev = RULE.severity      # a speed gain this large deserves it, memory pressure or not
    yield RULE.finding(
        profile, message=ON_CPU if cpu else FASTER if speed is not None else MESSAGE, remedy=None if cpu else remedy,
        severity=sev, impact=share / 2, source=source_of(profile, largest), share=share, bytes=f32_bytes,
        matmuls=f"; {pct(mm_f32 / mm_total)} of matmul time is float32" if mm_total else "",
        saving=0 if cpu else f32_bytes // 2, **(speed.fields() if speed is not None else {}),
        evidence={
            "float32_activation_bytes": f32_bytes,
            "peak_bytes": memory.peak_bytes,
            "share_of_peak": round(share, 4),
            "float32_matmul_share": round(mm_f32 / mm_total, 4) if mm_total else None,
            "largest": [{"shape": b.shape, "bytes": b.bytes, "share_of_peak": round(b.bytes / memory.peak_bytes, 4)}
                        for b in largest],
        })


@dataclasses.dataclass(frozen=True)
class _Speed:
    saving_ns: float        # per step
    share: float            # of the step
    why: str
    basis: str

    def fields(self) -> dict:
        return {"faster": self.saving_ns, "faster_share": self.share, "why": self.why, "basis": self.basis}


def _speed(profile: Profile) -> Optional[_Speed]:
    """On a GPU, the step time bfloat16 compute would save, from the measured op times: float32
    matmuls run at the f32 (on NVIDIA, tf32) rate, a fraction of bfloat16's (the peak table's two
    columns), and memory-bound ops on float32 activations would move half the bytes."""
    ops = ops_view.of(profile)
    step_ns = step_time.of(profile).median_ns
    if ops is None or not step_ns:
        return None
    peaks = peak_view.of(profile)
    f32, _ = peaks.at("f32")
    bf16, _ = peaks.at("bf16")
    if f32 is None or bf16 is None or not f32.flops_per_s or not bf16.flops_per_s:
        return None
    per = max(ops.steps, 1)
    ratio = bf16.flops_per_s / f32.flops_per_s
    weights = parameter_shapes(profile)
    mm = sum(r.time_ns for r in ops.rows if r.matmul and (r.instruction.matmul_dtype or r.instruction.dtype) == "f32")
    mem = sum(r.time_ns for r in ops.rows if not r.matmul and r.instruction.dtype == "f32"
              and r.instruction.shape not in weights and op_bound(r, f32) == "memory")
    mm, mem = mm / per, mem / per
    saving = mm * (1 - 1 / ratio) + mem / 2 if ratio > 1 else mem / 2
    if saving <= 0:
        return None
    halved = f"{ms(mem)} of memory-bound float32 activation ops at half the bytes"
    if ratio <= 1:      # one FLOP/s for every dtype (the user's --peak-flops): no matmul gain can be read from it
        why = (f"the peak measured against ({bf16.source}) gives float32 and bfloat16 matmuls one rate, so only "
               "the memory-bound ops' halved bytes are counted: the step would be faster, not only lighter")
        return _Speed(saving, saving / step_ns, why, halved)
    rate = (f"float32 matmuls run at the {f32.dtype} rate ({f32.flops_per_s / 1e12:.4g} TFLOP/s on the "
            f"{f32.device}), {ratio:.3g}x slower than bfloat16's {bf16.flops_per_s / 1e12:.4g} TFLOP/s ({bf16.source})")
    basis = f"{ms(mm)} of float32 matmuls per step at {1 / ratio:.2g} of the time, {halved}"
    return _Speed(saving, saving / step_ns, f"on this GPU {rate}: the step would be faster, not only lighter", basis)


RULE = Rule(
    id="float32-activations",
    severity="warning",
    backends=("cpu", "gpu", "tpu"),
    summary="large float32 activations at peak where bfloat16 compute would do (info only on CPU)",
    check=check,
    message=MESSAGE,
    needs=("buffers",),
    doc=__doc__,
)
