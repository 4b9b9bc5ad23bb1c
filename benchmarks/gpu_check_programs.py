"""The GPU check's programs and the Transformer rows, each with its work counted on paper
(run by benchmarks/gpu_check.py).

Paper counts are matmul FLOPs, the work the program runs (hardware FLOPs):
- a GEMM: 2·M·N·K;
- attention (B batch, H heads, T tokens, D head width): forward 4·B·H·T²·D (Q·Kᵀ and P·V, 2·T²·D each
  per head), halved by a causal mask; forward and backward 3.5x the forward: the backward is 2.5x
  the forward, FlashAttention's convention (its backward recomputes Q·Kᵀ: five matmuls to two);
- elementwise: 0 matmul FLOPs; bytes = the input read plus the output written;
- an MLP's gradient by its weights (L layers of D x D, batch B): 2·B·D² per layer forward, the same
  again for each layer's weight gradient and for each input gradient but the first layer's (not
  needed): (3·L - 1)·2·B·D²;
- the Transformer: per token and layer, 24·d² for QKV, the output projection and the MLP (x4), plus
  4·T·d for the scores and P·V over all T (XLA computes the masked half too); the output head 2·d·V;
  forward and backward 3x the forward (model FLOPs). Remat recomputes a rematted block's forward as
  far as its backward needs it: every matmul but the block's last, whose output only feeds the
  residual sum (XLA leaves that one out). The MLP's output layer is that last matmul for MLP remat,
  the attention's output projection for Attn and Block remat.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Optional

SIZES = {
    "full": {"gemm": 8192, "gemm_unaligned": 8191, "tokens": 8192, "width": 4096, "vocab": (50257, 50304),
             "elementwise_bytes": 2 ** 30, "attention": (16, 2048, 16, 128), "attention_impls": ("cudnn",),
             "dispatches": 1000, "mlp": (8192, 4096, 4),
             "workload_preset": "seed", "workload_vocab": (50257, 50304)},
    "tiny": {"gemm": 256, "gemm_unaligned": 255, "tokens": 256, "width": 128, "vocab": (1000, 1024),
             "elementwise_bytes": 4 * 2 ** 20, "attention": (2, 128, 2, 32), "attention_impls": ("xla", "cudnn"),
             "dispatches": 100, "mlp": (256, 256, 3),
             "workload_preset": "tiny", "workload_vocab": (500, 512)},
}


@dataclasses.dataclass
class Program:
    key: str                    # its folder under --out
    label: str
    flops: float                # matmul FLOPs per step on paper
    dtype: str                  # the matmul dtype, for the peak
    bound: str                  # what bounds it, on paper
    build: Callable[[], tuple[Callable, tuple]]   # () -> (step, args): step(*args) is one step
    bytes: Optional[float] = None   # bytes per step on paper, where the program is about them
    expect_ratio: float = 1.0   # advisor / paper expected where the implementation differs from paper
    note: str = ""
    needs_gpu: bool = False


def gemm(n: int, key: str) -> Program:
    def build():
        import jax
        import jax.numpy as jnp
        a = jax.random.normal(jax.random.PRNGKey(0), (n, n), jnp.bfloat16)
        b = jax.random.normal(jax.random.PRNGKey(1), (n, n), jnp.bfloat16) / n ** 0.5
        return jax.jit(lambda a, b: (a @ b) @ b), (a, b)
    return Program(key, f"bf16 GEMM `(a @ b) @ b`, {n}x{n}", 2 * 2 * n ** 3, "bf16", "compute", build=build)


def vocab_gemm(tokens: int, width: int, vocab: int, key: str) -> Program:
    def build():
        import jax
        import jax.numpy as jnp
        x = jax.random.normal(jax.random.PRNGKey(0), (tokens, width), jnp.bfloat16)
        w = jax.random.normal(jax.random.PRNGKey(1), (width, vocab), jnp.bfloat16) / width ** 0.5
        return jax.jit(lambda x, w: x @ w), (x, w)
    return Program(key, f"bf16 GEMM, logits-like: [{tokens}, {width}] @ [{width}, {vocab}]",
                   2 * tokens * width * vocab, "bf16", "compute", build=build)


def elementwise(nbytes: int) -> Program:
    n = nbytes // 4

    def build():
        import jax
        import jax.numpy as jnp
        return jax.jit(lambda x: x * 2.0 + 1.0), (jnp.ones((n,), jnp.float32),)
    return Program("elementwise", f"f32 `x * 2 + 1` over {nbytes / 2 ** 20:,.0f} MiB", 0.0, "f32", "memory",
                   build=build, bytes=2.0 * nbytes)


def attention(b: int, t: int, h: int, d: int, impl: str) -> Program:
    forward = 4 * b * h * t * t * d / 2          # causal: half the scores
    note, ratio = "", 1.0
    if impl == "xla":
        # XLA's implementation computes every score and masks half, and its backward reuses the forward's
        # P: two matmuls forward and four backward of 2·T²·D each, 12·B·H·T²·D, against the paper's 7.
        ratio = 12 / 7
        note = "XLA's attention computes the masked scores too and keeps P: x1.714 the FlashAttention count"

    def build():
        import jax
        import jax.numpy as jnp
        keys = jax.random.split(jax.random.PRNGKey(0), 3)
        q, k, v = (jax.random.normal(kk, (b, t, h, d), jnp.bfloat16) for kk in keys)

        def loss(q, k, v):
            out = jax.nn.dot_product_attention(q, k, v, is_causal=True, implementation=impl)
            return jnp.sum(out.astype(jnp.float32))
        # the loss too, as a training step has it: from the gradients alone XLA's implementation leaves
        # the forward's P·V out (its backward needs P, not the output): 5 matmuls instead of 6
        return jax.jit(jax.value_and_grad(loss, argnums=(0, 1, 2))), (q, k, v)
    return Program(f"attention_{impl}",
                   f"`jax.value_and_grad` of causal attention ({impl}), bf16, B={b} T={t} H={h} D={d}",
                   3.5 * forward, "bf16", "compute", build=build, expect_ratio=ratio, note=note,
                   needs_gpu=impl == "cudnn")


def dispatches(count: int, size: int = 1024) -> Program:
    def build():
        import jax
        import jax.numpy as jnp
        kernel = jax.jit(lambda x: x * 1.0001 + 1.0)

        def step(x):
            for _ in range(count):      # one dispatch and one small kernel each
                x = kernel(x)
            return x
        return step, (jnp.ones((size,), jnp.float32),)
    return Program("small_kernels", f"a Python loop of {count} jitted `x * 1.0001 + 1` on {size} floats", 0.0,
                   "f32", "host (one dispatch per kernel)", build=build)


def mlp_grad(batch: int, width: int, layers: int) -> Program:
    def build():
        import jax
        import jax.numpy as jnp
        keys = jax.random.split(jax.random.PRNGKey(0), layers + 1)
        ws = [jax.random.normal(k, (width, width), jnp.float32) / width ** 0.5 for k in keys[:-1]]
        x = jax.random.normal(keys[-1], (batch, width), jnp.float32)

        def loss(ws, x):
            for w in ws:
                x = jnp.tanh(x @ w)
            return jnp.mean(x ** 2)
        return jax.jit(jax.grad(loss)), (ws, x)
    return Program("mlp_f32", f"f32 MLP's gradient, {layers} layers of {width}x{width}, batch {batch}",
                   (3 * layers - 1) * 2 * batch * width * width, "f32", "compute", build=build)


def programs(preset: str) -> list[Program]:
    s = SIZES[preset]
    unaligned, aligned = s["vocab"]
    return [
        gemm(s["gemm"], "gemm"),
        gemm(s["gemm_unaligned"], "gemm_unaligned"),
        vocab_gemm(s["tokens"], s["width"], unaligned, "vocab_gemm_unaligned"),
        vocab_gemm(s["tokens"], s["width"], aligned, "vocab_gemm_aligned"),
        elementwise(s["elementwise_bytes"]),
        *(attention(*s["attention"], impl) for impl in s["attention_impls"]),
        dispatches(s["dispatches"]),
        mlp_grad(*s["mlp"]),
    ]


# --- the tutorial's rows, run as `advisor run-workload transformer --preset P --set ...` would ---------

_BF16, _F32 = "model.dtype=bfloat16", "model.dtype=float32"
_SCAN, _UNROLLED = "model.scan_layers=true", "model.scan_layers=false"
_NO_REMAT, _REMAT = "model.remat=", "model.remat=MLP,Attn"
_MB4, _MB1 = "optimizer.num_minibatches=4", "optimizer.num_minibatches=1"


def rows(preset: str) -> list[tuple[str, str, list[str]]]:
    """(key, label, overrides), in the order they run: each pair is complete as early as it can be."""
    unaligned, aligned = SIZES[preset]["workload_vocab"]
    return [
        ("bf16_scan", "bfloat16, scan, no remat, 4 minibatches (tutorial row 2)", [_BF16, _SCAN, _NO_REMAT, _MB4]),
        ("bf16_unrolled", "bfloat16, unrolled, no remat, 4 minibatches (row 3)", [_BF16, _UNROLLED, _NO_REMAT, _MB4]),
        ("f32_scan", "float32, scan, no remat, 4 minibatches (row 1)", [_F32, _SCAN, _NO_REMAT, _MB4]),
        ("bf16_remat", "bfloat16, scan, remat MLP+Attn, 4 minibatches (row 4)", [_BF16, _SCAN, _REMAT, _MB4]),
        ("bf16_remat_mb1", "bfloat16, scan, remat MLP+Attn, 1 minibatch (row 6)", [_BF16, _SCAN, _REMAT, _MB1]),
        ("vocab_unaligned", f"the preset's config, vocabulary {unaligned:,}", [f"data.vocab_size={unaligned}"]),
        ("vocab_aligned", f"the preset's config, vocabulary {aligned:,}", [f"data.vocab_size={aligned}"]),
    ]


# (label, first key, second key, the rule whose advice is about this change); keys of programs or rows
PAIRS = [
    ("GEMM size: unaligned -> aligned", "gemm_unaligned", "gemm", "unaligned-matmul"),
    ("logits GEMM: unaligned -> aligned vocabulary", "vocab_gemm_unaligned", "vocab_gemm_aligned", "unaligned-matmul"),
    ("dtype: float32 -> bfloat16", "f32_scan", "bf16_scan", "float32-activations"),
    ("layers: scan -> unrolled", "bf16_scan", "bf16_unrolled", "scan-dynamic-update-slice"),
    ("remat: none -> MLP+Attn", "bf16_scan", "bf16_remat", "missing-remat"),
    ("minibatches: 4 -> 1", "bf16_remat", "bf16_remat_mb1", "unneeded-grad-accumulation"),
    ("vocabulary: unaligned -> aligned", "vocab_unaligned", "vocab_aligned", "unaligned-matmul"),
]
VERIFY_ROW = "f32_scan"      # the tutorial's first row: `--verify` measures each of its fixes


def transformer_paper(config: dict[str, Any]) -> tuple[float, float]:
    """(model FLOPs, hardware FLOPs) per step of the bundled Transformer's config."""
    d, m = config["data"], config["model"]
    tokens, t, v = d["batch_size"] * d["seq_len"], d["seq_len"], d["vocab_size"]
    h, e = m["hidden_size"], m["mlp_expansion"]
    a = (h // m["head_dim"]) * m["head_dim"]                 # attention width: heads x head width
    qkv, scores, proj = 2 * h * 3 * a, 4 * t * a, 2 * a * h   # QKV; scores and P·V; output projection
    mlp_in, mlp_out = 2 * h * e * h, 2 * e * h * h
    model = 3 * tokens * (m["num_layers"] * (qkv + scores + proj + mlp_in + mlp_out) + 2 * h * v)
    remat = set(m["remat"] or ())
    if "Block" in remat:        # the block is the MLP, then attention: all but the output projection again
        again = mlp_in + mlp_out + qkv + scores
    else:
        again = (mlp_in if "MLP" in remat else 0) + (qkv + scores if "Attn" in remat else 0)
    return float(model), float(model + tokens * m["num_layers"] * again)
