"""remat-too-broad: a whole block is rematerialized where its parts would save nearly as much.

## What it does
Finds rematerialized computations that span several sub-blocks, each with its own matmuls
(e.g. `nn.remat` around a Transformer block holding an MLP and an attention block), and
estimates what rematting the sub-blocks separately would keep in addition: one more input
per extra sub-block, the size of the block inputs saved at the peak. It fires only when
that extra memory is small against the peak.

## Why is this bad?
Rematting the parts keeps each part's input; rematting the whole block keeps only the
block's input. When those inputs are small next to the rest of memory, the broader remat
gains little memory but loses the freedom XLA has to schedule the recomputation; the
tutorial measured 3.8 GB / 0.96 s for remat=Block against 3.9 GB / 0.91 s for MLP+Attn.

## Example
```python
block = nn.remat(TransformerBlock, prevent_cse=False)
```

## Use instead
```python
mlp = nn.remat(MLPBlock, prevent_cse=False)       # inside TransformerBlock
attn = nn.remat(AttentionBlock, prevent_cse=False)
```

## Options
- `max_saving_share` (default 0.1): fire when the broader remat saves less than this share of peak memory.
"""

from __future__ import annotations

import collections

from advisor.message import Message
from advisor.model import Profile
from advisor.remedies import Kind, Remedy
from advisor.rule import Rule
from advisor.views.activations import activations

from ._common import bundled_config, kept_by_remat, measured_by, workload

_MARK = "rematted_computation/"
MESSAGE = Message(
    title="the whole {scope} is rematted ({parts}), saving only about {extra:mib} ({share:pct} of peak) over "
          "rematting its parts",
    bundled="remat the sub-blocks ({kids}) instead of the whole {scope}",
    saving=None,
    gain="less recompute scheduling overhead (the tutorial: 0.96 s -> 0.91 s per step); {measured_by} measures it here",
    cost="about {extra:mib} more peak memory",
)


def _broad_scopes(profile: Profile) -> dict[str, list[str]]:
    """Rematted scopes with two or more children that are blocks themselves.

    A child is a block when it holds matmuls in two or more scopes of its own (an MLP's
    input and output layers); a single Dense layer's matmul is not.
    """
    module = profile.modules.get(profile.step_module or "")
    if module is None:
        return {}
    inner: dict[tuple[str, str], set[str]] = collections.defaultdict(set)
    for op_name in module.instructions.op_names():
        if "dot_general" not in op_name or _MARK not in op_name:
            continue
        parts = op_name.split(_MARK, 1)[1].split("/")
        if len(parts) >= 4:
            inner[(parts[0], parts[1])].add(parts[2])
    children = collections.defaultdict(list)
    for (scope, child), grandchildren in inner.items():
        if len(grandchildren) >= 2:
            children[scope].append(child)
    return {scope: sorted(kids) for scope, kids in children.items() if len(kids) >= 2}


def check(profile: Profile, max_saving_share: float = 0.1):
    memory = profile.memory
    if memory is None or memory.peak_bytes <= 0:
        return
    config = bundled_config(profile)
    scopes = _broad_scopes(profile)
    block_remat = workload(profile) == "transformer" and "Block" in (config or {}).get("model", {}).get("remat", [])
    if not scopes and not block_remat:
        return
    parts = max((len(kids) for kids in scopes.values()), default=2)
    block_inputs = kept_by_remat(activations(profile))
    extra = block_inputs * (parts - 1)
    share = extra / memory.peak_bytes
    if share >= max_saving_share:
        return
    scope, kids = next(iter(scopes.items()), ("block", ["mlp", "attn"]))
    yield RULE.finding(
        profile, remedy=Remedy(Kind.REMAT, "sub_blocks"), impact=0.05, scope=scope, parts=" + ".join(kids),
        kids=", ".join(kids), extra=extra, share=share, measured_by=measured_by(profile, "run-workload --verify"),
        evidence={
            "rematted_scope": scope,
            "sub_blocks": kids,
            "block_input_bytes_at_peak": block_inputs,
            "estimated_saving_over_finer_remat_bytes": int(extra),
            "peak_bytes": memory.peak_bytes,
            "share_of_peak": round(share, 4),
        })


RULE = Rule(
    id="remat-too-broad",
    severity="info",
    backends=("cpu", "gpu", "tpu"),
    summary="the whole block is rematted where rematting its parts saves nearly the same memory",
    check=check,
    message=MESSAGE,
    needs=("hlo", "buffers"),
    doc=__doc__,
)
