"""Each accelerator's small kernels (`views.kernels.of(profile)`): how many kernels ran shorter
than a threshold and their time, over the window, from the loader's kernel duration buckets
(`DeviceSummary.kernel_counts`, `model.KERNEL_BUCKETS_NS`). Launch-bound reads them.

The threshold is a bound setting (`Settings.small_kernel_ns`, 10 µs: on a GPU such a kernel is
mostly its launch's fixed cost), one of the buckets' edges.
"""
from __future__ import annotations

import dataclasses
from typing import Any

from ..model import KERNEL_BUCKETS_NS, DeviceSummary, Profile
from ..settings import SMALL_KERNEL_NS, bound
from .bound import cached


@dataclasses.dataclass(frozen=True)
class SmallKernels:
    count: int = 0
    ns: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {"small_kernels": self.count, "small_kernel_time_ms": round(self.ns / 1e6, 3)}


@dataclasses.dataclass(frozen=True)
class Kernels:
    threshold_ns: float                                   # small: shorter than this
    small: dict[str, SmallKernels] = dataclasses.field(default_factory=dict)    # device plane -> its small kernels
    notes: tuple[str, ...] = ()

    def of_device(self, name: str) -> SmallKernels:
        return self.small.get(name, SmallKernels())

    def to_json(self) -> dict[str, Any]:
        return {"threshold_us": self.threshold_ns / 1e3, "devices": {k: v.to_json() for k, v in self.small.items()}}


def of(profile: Profile) -> Kernels:
    return cached(profile, "kernels", lambda p: build(p, bound(p).small_kernel_ns))


def build(profile: Profile, threshold_ns: float = SMALL_KERNEL_NS) -> Kernels:
    return Kernels(threshold_ns, {d.name: small_kernels(d, threshold_ns) for d in profile.devices})


def small_kernels(device: DeviceSummary, threshold_ns: float) -> SmallKernels:
    """The device's kernels shorter than threshold_ns (an edge of model.KERNEL_BUCKETS_NS)."""
    if threshold_ns not in KERNEL_BUCKETS_NS:
        raise ValueError(f"a small kernel's threshold is one of {KERNEL_BUCKETS_NS} ns, not {threshold_ns}")
    below = KERNEL_BUCKETS_NS.index(threshold_ns) + 1
    return SmallKernels(sum(device.kernel_counts[:below]), sum(device.kernel_bucket_ns[:below], 0.0))
