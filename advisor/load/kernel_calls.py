"""Kernels XLA does not describe: Triton and Pallas kernels called from the HLO.

A `pallas_call` (or jax-triton's `triton_call`) reaches XLA as a custom call holding the kernel
itself: `__gpu$xla.gpu.triton` (Pallas's Triton lowering: an MLIR attribute dictionary with the
kernel's `name`, its grid and its Triton IR as MLIR bytecode), `triton_kernel_call` /
`triton_kernel_call_ffi` (jaxlib's Triton call: the `name` beside a compressed kernel),
`mosaic_gpu` / `mosaic_gpu_v2` (Pallas's Mosaic GPU lowering: the module's text, its kernel function
named `<name>_mosaic_gpu`) and `tpu_custom_call` (Pallas on TPU). The HLO gives their operands and
results, never their work: their FLOPs stay unknown. What it does give: the kernel's name, and
whether its Triton IR multiplies matrices (`tt.dot`: the bytecode's table of operation names holds
`dot`), which says what the kernel's time is spent on.

XLA's own Triton kernels are fusions (`fusion_backend_config.kind` `__triton_gemm`,
`__triton_nested_gemm_fusion`, `__triton`) whose fused computation is HLO: they are counted as any
fusion is (a dot inside one makes it a matmul).
"""

from __future__ import annotations

import re

_NAME = re.compile(rb'\bname = "([^"\\]{1,200})"')
_MOSAIC_NAME = re.compile(rb"@([A-Za-z_][A-Za-z0-9_$.]{0,200})_mosaic_gpu")
# the operation names of the Triton dialect's matrix multiplications in MLIR bytecode's string table
_TRITON_DOT = (b"\\00dot\\00", b"\x00dot\x00", b"\\00dot_scaled\\00", b"\x00dot_scaled\x00", b"tt.dot")


def user_kernel(target: str, backend_config: bytes) -> tuple[str, bool]:
    """(the kernel's name, whether its IR holds a matrix multiplication) of a Triton or Pallas custom
    call, as far as its backend config says; ("", False) for any other call."""
    if target in ("__gpu$xla.gpu.triton", "triton_kernel_call", "triton_kernel_call_ffi"):
        m = _NAME.search(backend_config)
        name = m.group(1).decode("utf-8", "replace") if m else ""
        return name or "?", any(k in backend_config for k in _TRITON_DOT)
    if target in ("mosaic_gpu", "mosaic_gpu_v2"):
        m = _MOSAIC_NAME.search(backend_config)
        return (m.group(1).decode("utf-8", "replace") if m else "?"), False
    return "", False
