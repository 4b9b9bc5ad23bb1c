"""The step's peak memory (`views.memory.of(profile)`): how much, where the figure comes from, and what
is live there (by the buffers' kind, the largest buffers).

The one definition of peak memory that analyze, compare and check share: XLA's buffer assignment
of the step program where the trace has it, else the device allocator that held the most bytes
during the trace (GPU/TPU), else unknown.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Optional

from ..model import Buffer, Profile
from .bound import cached

LARGEST = 10        # buffers named, by size


@dataclasses.dataclass(frozen=True)
class Memory:
    peak_bytes: Optional[int]
    source: Optional[str]
    module: str = ""                    # the program whose buffers are live at the peak ("": none known)
    by_kind: dict[str, int] = dataclasses.field(default_factory=dict)    # buffer group -> bytes, most first
    largest: tuple[Buffer, ...] = ()
    notes: tuple[str, ...] = ()

    def to_json(self) -> Optional[dict[str, Any]]:
        """What is live at the peak (None where the buffers are not known)."""
        if not self.module:
            return None
        return {"module": self.module, "peak_bytes": self.peak_bytes, "by_kind": dict(self.by_kind),
                "largest": [{"instruction": b.instruction, "shape": b.shape, "group": b.group, "bytes": b.bytes}
                            for b in self.largest]}


def of(profile: Profile) -> Memory:
    return cached(profile, "memory", _build)


def _build(profile: Profile) -> Memory:
    mem = profile.memory
    if mem:
        return Memory(mem.peak_bytes, f"XLA buffer assignment of {mem.module}", mem.module,
                      dict(sorted(mem.bytes_by_group().items(), key=lambda kv: -kv[1])),
                      tuple(sorted(mem.buffers, key=lambda b: -b.bytes)[:LARGEST]))
    device_allocators = [a for a in profile.allocators if a.allocator.startswith(("GPU_", "TPU_"))]
    if device_allocators:
        top = max(device_allocators, key=lambda a: a.peak_bytes)
        return Memory(top.peak_bytes, f"allocator {top.allocator} (most bytes in use during the trace)")
    return Memory(None, None)
