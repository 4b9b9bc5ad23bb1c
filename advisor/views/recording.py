"""How the run was recorded (`runs[].summary.recorded_with`): the JAX, jaxlib and CUDA/ROCm versions,
XLA_FLAGS, and whether the GPU ran the step's kernels from command buffers (CUDA graphs).

The versions come from the run's advisor_run.json (`run-workload`, `advisor.trace`) where it has them,
else from the trace's `/host:metadata` plane (JAX 0.9 and later write `jax_version`, `jaxlib_version`,
`cuda_version`, `cuda_driver_version`, `rocm_version`...). XLA_FLAGS is in advisor_run.json only: a
trace does not carry the flags. Whether command buffers ran is read from the device plane (kernels
launched as part of a CUDA graph), so two traces recorded with `--xla_gpu_enable_command_buffer=` and
without differ there even when neither names its flags.
"""
from __future__ import annotations

import dataclasses
from typing import Any

from ..model import Profile
from .bound import cached

MAX_FLAGS = 400     # characters of XLA_FLAGS kept (renderers escape it: it is the run's text)

# the trace's stat -> the key shown, in the order shown
_TRACE_KEYS = (("jax_version", "jax"), ("jaxlib_version", "jaxlib"), ("cuda_version", "cuda"),
               ("cuda_runtime_version", "cuda_runtime"), ("cuda_driver_version", "cuda_driver"),
               ("rocm_version", "rocm"))


@dataclasses.dataclass(frozen=True)
class Recording:
    figures: dict[str, Any]         # runs[].summary.recorded_with
    notes: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return self.figures


def of(profile: Profile) -> Recording:
    return cached(profile, "recording", lambda p: Recording(_build(p)))


def _build(profile: Profile) -> dict[str, Any]:
    out: dict[str, Any] = {}
    meta = profile.run_metadata if isinstance(profile.run_metadata, dict) else {}
    versions = meta.get("versions") if isinstance(meta.get("versions"), dict) else {}
    for key in ("jax", "jaxlib"):
        if isinstance(versions.get(key), str):
            out[key] = versions[key][:40]
    for stat, key in _TRACE_KEYS:
        value = profile.trace_versions.get(stat)
        if key not in out and isinstance(value, str) and value:
            out[key] = value[:40]
    platform = versions.get("platform")
    if isinstance(platform, str) and platform.split(" ")[0] in ("cuda", "rocm") and platform.split(" ")[0] not in out:
        out[platform.split(" ")[0]] = platform.split(" ", 1)[-1][:40]
    if isinstance(meta.get("xla_flags"), str):
        flags = meta["xla_flags"]
        out["xla_flags"] = flags if len(flags) <= MAX_FLAGS else flags[:MAX_FLAGS - 1] + "…"
    active = profile.active_devices
    if profile.backend == "gpu" and active:
        launches = sum(d.graph_launches for d in active)
        out["command_buffers"] = "used" if launches else "not used"
    return out

