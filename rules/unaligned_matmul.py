"""unaligned-matmul: matmuls whose dimensions leave the tensor cores (GPU) or the MXU (TPU) partly idle.

## What it does
Reads the dimensions (M, N, K) of every matmul of the step (dots, GEMM library calls, fusions
around a dot) from the HLO, and their measured time. A dimension that is not a multiple of the
unit the hardware computes in (16 bytes of elements on a GPU: 8 for bfloat16 and float16, 4 for
float32 as TF32, 16 for 8-bit types; 128 on a TPU's MXU) makes the library pad it, pick a slower
kernel or leave part of each tile empty. It fires when such matmuls take at least `min_share` of
the step's matmul time, and names each with its padded size.

## Why is this bad?
Tensor cores and the MXU work on fixed tiles: a [4096, 1000] x [1000, 1000] matmul runs in the
tiles of a [4096, 1008] x [1008, 1008] one at best, and cuBLAS falls back to kernels that do not
use tensor cores at all for some unaligned shapes. The cost is a share of the matmul time, not of
the FLOPs. Where the run also has aligned matmuls of the same dtype, the gain is estimated from
their measured rate; otherwise one trace cannot measure it.

## Example
```python
vocab = 50257                                    # GPT-2's vocabulary: odd
logits = nn.Dense(vocab)(h)
```

## Use instead
```python
vocab = 50304                                    # padded to a multiple of 64 (and of 128 on TPU)
logits = nn.Dense(vocab)(h)[..., :50257]
```
Pad hidden sizes, head dimensions, vocabularies and batch sizes to multiples of 64 (128 on TPU);
multiples of 8 are the minimum for bfloat16 tensor cores.

## Options
- `min_share` (default 0.05): fire when unaligned matmuls take at least this share of matmul time.
"""

from __future__ import annotations

from advisor.message import Message
from advisor.model import Profile
from advisor.rule import Rule
from advisor.views import ops as ops_view

_BYTES = {"bf16": 2, "f16": 2, "f32": 4, "f64": 8, "s8": 1, "u8": 1}


def alignment(backend: str, dtype: str) -> int:
    """The multiple each matmul dimension should be: 16 bytes of elements on a GPU, 128 on a TPU."""
    if backend == "tpu":
        return 128
    size = _BYTES.get(dtype, 1 if dtype.startswith("f8") else 4)
    return max(16 // size, 1)


def _padded(n: int, unit: int) -> int:
    return -(-n // unit) * unit


MESSAGE = Message(
    title="{count} matmul(s) with dimensions not a multiple of {unit} take {share:pct} of matmul time ({time:ms} per "
          "step); the longest, {top}: {shape}",
    fix="pad the dimensions named to multiples of {unit} (64 or more is better on a GPU: whole tiles), e.g. the hidden "
        "size, head dimension, vocabulary or batch, and slice the padding off the result",
    gain="about {saving:ms} per step: the unaligned matmuls at the measured rate of the aligned ones, their padded "
         "work included",
    cost="the padded rows and columns are computed and stored (a few % more FLOPs and memory); a padded vocabulary "
         "needs its logits masked or sliced",
)
UNMEASURED = MESSAGE.but(gain="not measurable from this trace alone (no aligned matmul of the same dtype ran to "
                              "compare with): up to the unaligned matmuls' share of matmul time")


def check(profile: Profile, min_share: float = 0.05):
    ops = ops_view.of(profile)
    if ops is None:
        return
    per = max(ops.steps, 1)
    matmuls = [r for r in ops.rows if r.instruction.matmul_dims and r.time_ns > 0]
    total = sum(r.time_ns for r in matmuls)
    if not total:
        return
    unaligned, aligned = [], []
    for r in matmuls:
        dtype = r.instruction.matmul_dtype or r.instruction.dtype
        unit = alignment(profile.backend, dtype)
        _, m, n, k = r.instruction.matmul_dims
        bad = {name: (v, _padded(v, unit)) for name, v in (("M", m), ("N", n), ("K", k)) if v % unit and v > 1}
        (unaligned if bad else aligned).append((r, bad, unit))
    time = sum(r.time_ns for r, _, _ in unaligned)
    share = time / total
    if not unaligned or share < min_share:
        return
    saving = _saving(unaligned, aligned)
    unaligned.sort(key=lambda x: -x[0].time_ns)
    top, bad, unit = unaligned[0]
    yield RULE.finding(
        profile, message=MESSAGE if saving is not None else UNMEASURED, saving=None if saving is None else saving / per,
        count=len(unaligned), unit=unit, share=share, time=time / per, top=top.name,
        shape=", ".join(f"{d}={v} (pad to {p})" for d, (v, p) in bad.items()),
        impact=share * sum(r.time_ns for r in matmuls) / max(sum(r.time_ns for r in ops.rows), 1.0),
        source=str(top.instruction.source) if top.instruction.source else None,
        evidence={
            "unaligned_share_of_matmul_time": round(share, 4),
            "unaligned_time_per_step_ms": round(time / per / 1e6, 3),
            "alignment": unit,
            "matmuls": [{"op": r.name, "module": r.module, "batch_m_n_k": list(r.instruction.matmul_dims),
                         "dtype": r.instruction.matmul_dtype, "time_per_step_ms": round(r.time_ns / per / 1e6, 3),
                         "unaligned": {d: {"size": v, "padded": p} for d, (v, p) in b.items()}}
                        for r, b, _ in unaligned[:8]],
        })


def _saving(unaligned, aligned):
    """Time the unaligned matmuls would save at the aligned ones' measured FLOP rate (their padded work
    included); None without an aligned matmul of the same dtype to compare with."""
    saved, found = 0.0, False
    for r, bad, _unit in unaligned:
        dtype = r.instruction.matmul_dtype
        ref = [a for a, _, _ in aligned if a.instruction.matmul_dtype == dtype and a.flops]
        if not ref or not r.flops:
            continue
        found = True
        rate = sum(a.flops for a in ref) / sum(a.time_ns for a in ref)
        padded = r.flops
        for _, (v, p) in bad.items():
            padded *= p / v
        saved += max(r.time_ns - padded / rate, 0.0)
    return saved if found else None


RULE = Rule(
    id="unaligned-matmul",
    severity="warning",
    backends=("gpu", "tpu"),
    summary="matmul dimensions that are not multiples of the tensor-core or MXU tile leave it partly idle",
    check=check,
    message=MESSAGE,
    needs=("hlo",),
    doc=__doc__,
)
