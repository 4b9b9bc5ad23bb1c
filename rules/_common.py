"""Small helpers the rules share: reading what a profile says about the run."""

from __future__ import annotations

from typing import Optional

from advisor.model import Buffer, Profile


def bundled_config(profile: Profile) -> Optional[dict]:
    """The resolved config when the trace was recorded by a bundled workload, else None."""
    meta = profile.run_metadata
    return meta.get("config") if meta.get("workload") else None


def workload(profile: Profile) -> Optional[str]:
    return profile.run_metadata.get("workload") or None


def per_step(profile: Profile, total_ns: float) -> float:
    """A total over the profiled window, divided by the number of steps (1 when unknown)."""
    return total_ns / max(len(profile.steps), 1)


def activations(profile: Profile) -> list[Buffer]:
    """Temporaries live at the step's memory peak: mostly what the forward saved for the backward."""
    if profile.memory is None:
        return []
    return [b for b in profile.memory.buffers if b.group == "Temporary"]


def is_training_step(profile: Profile) -> bool:
    """The step program differentiates something (JAX names backward ops `transpose(...)`)."""
    module = profile.modules.get(profile.step_module or "")
    return bool(module) and any("transpose(" in i.op_name for i in module.instructions.values())
