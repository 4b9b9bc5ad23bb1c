"""Op categories for time breakdowns: from the HLO instruction when known, else the kernel name."""

from __future__ import annotations

import re
from typing import Optional

from .model import Instruction

CATEGORIES = ("matmul", "attention", "convolution", "fusion", "copy/dynamic-update-slice", "collective",
              "custom-call", "memcpy", "other")

_COLLECTIVES = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute",
                "all-reduce-start", "all-gather-start", "collective-permute-start")
_COPIES = ("copy", "dynamic-update-slice", "dynamic-slice", "copy-start")
_MATMUL_TARGET = re.compile(r"gemm|matmul|cublas|hipblas", re.I)
_MATMUL_KERNEL = re.compile(r"gemm|xmma|cutlass|nvjet|Cijk_|matmul|sgemm|hgemm", re.I)
_ATTENTION_KERNEL = re.compile(r"attention|attn|mha|flash", re.I)
_MEMCPY_NAME = re.compile(r"^(Memcpy|CopyDeviceTo|CopyHostTo|__amd_rocclr_copyBuffer)")


def categorize(instruction: Optional[Instruction], kernel_name: str = "") -> str:
    if instruction is not None:
        ins = instruction
        if ins.opcode in ("dot",) or "dot" in ins.fused_opcodes:
            return "matmul"
        if ins.opcode == "convolution" or "convolution" in ins.fused_opcodes or ins.is_convolution_call:
            return "convolution"
        if ins.opcode in _COLLECTIVES or any(op in ins.fused_opcodes for op in _COLLECTIVES):
            return "collective"
        if ins.is_attention:
            return "attention"
        if ins.kernel_dot:      # a Triton kernel whose IR multiplies matrices
            return "attention" if _ATTENTION_KERNEL.search(ins.kernel) else "matmul"
        if ins.opcode == "custom-call":
            return "matmul" if _MATMUL_TARGET.search(ins.custom_call_target) else "custom-call"
        if ins.opcode in _COPIES or any(op in ins.fused_opcodes for op in ("dynamic-update-slice",)):
            return "copy/dynamic-update-slice"
        if ins.opcode == "fusion":
            return "fusion"
        return "other"
    if _MEMCPY_NAME.search(kernel_name):
        return "memcpy"
    if _MATMUL_KERNEL.search(kernel_name):
        return "matmul"
    if "nccl" in kernel_name.lower() or "rccl" in kernel_name.lower():
        return "collective"
    if "fusion" in kernel_name:
        return "fusion"
    return "other"
