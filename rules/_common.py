"""Small helpers the rules share: what the run's metadata says (a bundled workload's config), who
measures a change, and what a shape says (its dims, dtype, last dim). The analyses of a profile the
rules share are views: `advisor.views.activations` (activations, input shapes, weight dims, training,
bfloat16), `advisor.views.layers` (layers, stacking copies, source lines), `advisor.views.step_time`
(per-step figures), `advisor.views.idle` (compiles, the warm-up step).
"""

from __future__ import annotations

from typing import Optional

from advisor.model import Profile
from advisor.model import merge_intervals as merge  # noqa: F401 - the rules' name for it
from advisor.views.activations import dims, is_backward  # noqa: F401 - the shape helpers the rules share


def bundled_config(profile: Profile) -> Optional[dict]:
    """The resolved config when the trace was recorded by a bundled workload, else None."""
    meta = profile.run_metadata
    return meta.get("config") if meta.get("workload") else None


def workload(profile: Profile) -> Optional[str]:
    return profile.run_metadata.get("workload") or None


# What measures a change's step time on the user's own code (a trace not recorded by a bundled
# workload, whose config run-workload --verify cannot vary): advisor.verify times the step with and
# without the change, advisor check --entry times the pull request against its base branch.
YOUR_CODE_MEASURES = "on your code, advisor.verify(make_step, changes, time=True) or advisor check --entry"


def measured_by(profile: Profile, bundled: str) -> str:
    """Who measures a change's step time: `bundled` (run-workload --verify's words) for a bundled
    workload's run, the user's own tools for the user's trace."""
    return bundled if workload(profile) else YOUR_CODE_MEASURES


def last_dim(shape: str) -> int:
    inner = shape.rstrip("]").split("[")[-1]
    try:
        return int(inner.split(",")[-1])
    except ValueError:
        return 0


def dtype(shape: str) -> str:
    return shape.split("[")[0]


def is_attention_logits(shape: str, min_len: int = 32) -> bool:
    """[..., heads, q, k] with q == k: attention scores or probabilities."""
    d = dims(shape)
    return len(d) >= 4 and d[-1] == d[-2] and d[-1] >= min_len


def kept_by_remat(buffers) -> int:
    """What remat would still keep: the narrowest activations (each block's input). When every
    activation has the same width, the block inputs are not among them (they are shaped like the
    step's input, or not saved apart) and remat keeps none of these."""
    ranked = [b for b in buffers if len(dims(b.shape)) >= 2]
    if not ranked:
        return 0
    narrowest = min(last_dim(b.shape) for b in ranked)
    if all(last_dim(b.shape) == narrowest for b in ranked):
        return 0
    return sum(b.bytes for b in ranked if last_dim(b.shape) == narrowest)
