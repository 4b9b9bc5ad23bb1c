"""Each op's time per step and its bytes live at the memory peak, under a key that names the same op
in another program (`views.op_table.of(profile)`): what `compare` and `check` diff between two runs
(advisor/op_diff.py).

Instruction names (`fusion.12`) are numbered anew in every program, so they cannot match two runs'
ops. The key is JAX's `op_name` metadata, made the same for the same op in both programs, with the
op's source line; where an instruction has no `op_name` (XLA's own copies and broadcasts), its
fingerprint: opcode, result shape and, for a fusion, the opcodes inside it (what it computes).

`op_name` is made the same by leaving out the scopes a transform adds around an unchanged op:
`checkpoint/` (jax.checkpoint, nn.remat), `closed_call/` and `eval_jaxpr/` (how JAX versions name a
called jaxpr), and a scope entered twice in a row (a lifted transform: `block.<lambda>/block/
block.<lambda>/block` is `block.<lambda>/block`), so that the backward pass's matmul is one op with
remat or without. What remat recomputes keeps `rematted_computation` in its name: it is a new op.

Several instructions can share a key (a matmul's two gradients): they are one row, their times and
bytes summed. Times are one device's (the ops view's), divided by the run's steps (by 1 when the
trace has none).
"""
from __future__ import annotations

import collections
import dataclasses
import re
from typing import Any, Optional

from ..model import Instruction, Profile
from . import ops
from .bound import cached

_DROPPED = frozenset({"checkpoint", "closed_call", "eval_jaxpr"})
_LOOP = frozenset({"while", "body", "cond"})      # nested loops are real nesting: never collapsed
_SUFFIX = re.compile(r"\.\d+$")


@dataclasses.dataclass(frozen=True)
class OpEntry:
    """One key's ops in one run."""
    name: str                   # the op_name made comparable, or the fingerprint where there is none
    source: Optional[str]       # file:line of the first frame in the user's code (advisor's files by package path)
    ms_per_step: float          # self time per step, one device
    per_step: float             # executions per step
    peak_bytes: int             # bytes of its results live at the step program's memory peak
    instructions: tuple[str, ...]   # the instructions under this key, in this run's program (most time first)
    category: str

    @property
    def key(self) -> str:
        return key(self.name, self.source)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "source": self.source, "ms_per_step": round(self.ms_per_step, 4),
                "per_step": round(self.per_step, 3), "peak_bytes": self.peak_bytes,
                "instructions": list(self.instructions), "category": self.category}


@dataclasses.dataclass(frozen=True)
class OpTable:
    entries: tuple[OpEntry, ...]    # most time first
    steps: int                      # the steps the figures are per (0: the trace has none, figures over its window)
    why: str = ""                   # why there are no entries ("": there are)
    notes: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"steps": self.steps, "ops": [e.to_json() for e in self.entries], "why": self.why or None}


def key(name: str, source: Optional[str]) -> str:
    return f"{name} @ {source}" if source else name


def match_name(op_name: str) -> str:
    """JAX's op_name with the scopes a transform adds around an unchanged op left out (module docstring)."""
    parts = [p for p in op_name.split("/") if p and p not in _DROPPED]
    changed = True
    while changed:
        changed = False
        for n in range(1, len(parts) // 2 + 1):
            for i in range(len(parts) - 2 * n + 1):
                run = parts[i:i + n]
                if run == parts[i + n:i + 2 * n] and not set(run) <= _LOOP:
                    del parts[i + n:i + 2 * n]
                    changed = True
                    break
            if changed:
                break
    if parts:
        parts[-1] = _SUFFIX.sub("", parts[-1])
    return "/".join(parts)


def fingerprint(ins: Instruction) -> str:
    """What an instruction without op_name computes: opcode, result shape, a fusion's opcodes, a call's target."""
    inner = sorted(ins.fused_opcodes - {"parameter"})
    what = f" of {'+'.join(inner)}" if inner else f" {ins.custom_call_target}" if ins.custom_call_target else ""
    return f"{ins.opcode} {ins.shape}{what}"


def of(profile: Profile) -> OpTable:
    """Empty, saying why, without the step program's HLO (no op can be named)."""
    return cached(profile, "op_table", _build)


def _build(profile: Profile) -> OpTable:
    from ..sources import shown

    rows = ops.of(profile)
    if rows is None:
        return OpTable((), len(profile.steps), "the trace holds no HLO of the step program: its ops cannot be named")
    ours = bool(isinstance(profile.run_metadata, dict) and profile.run_metadata.get("workload"))

    def named(ins: Instruction) -> tuple[str, Optional[str]]:
        source = shown(str(ins.source), ours) if ins.source is not None else None
        return (match_name(ins.op_name) if ins.op_name else fingerprint(ins)), source

    steps = max(rows.steps, 1)
    time: dict = collections.defaultdict(float)
    runs: dict = collections.defaultdict(float)
    names: dict = collections.defaultdict(list)
    category: dict = {}
    for r in rows.rows:         # most time first
        k = named(r.instruction)
        time[k] += r.time_ns
        runs[k] += r.executions
        names[k].append(r.name)
        category.setdefault(k, r.category)
    peak: dict = collections.defaultdict(int)
    mem = profile.memory
    module = profile.modules.get(mem.module) if mem else None
    for b in mem.buffers if mem else ():
        ins = module.instructions.get(b.instruction) if module is not None else None
        k = named(ins) if ins is not None else (f"buffer {b.shape}", None)
        peak[k] += b.bytes
        if k not in names:
            names[k].append(b.instruction)
            category.setdefault(k, b.group.lower())
    entries = [OpEntry(name=k[0], source=k[1], ms_per_step=time.get(k, 0.0) / steps / 1e6,
                       per_step=runs.get(k, 0.0) / steps, peak_bytes=peak.get(k, 0), instructions=tuple(names[k]),
                       category=category[k]) for k in names]
    entries.sort(key=lambda e: (-e.ms_per_step, -e.peak_bytes, e.key))
    return OpTable(tuple(entries), rows.steps)
