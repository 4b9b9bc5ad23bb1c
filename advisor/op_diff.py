"""Which ops changed between two runs (`compare`, and a `check` that fails on time or memory): each
op's time per step and bytes at the memory peak on both sides, matched across the two programs by
the key of advisor/views/op_table.py (JAX's op_name made comparable and the source line, or the
HLO fingerprint), never by instruction number, which differs between programs.

A pure function over two runs' op tables (`Metrics.ops`, the JSON of the op_table view): ops of one
key on both sides are one row; an op whose source line moved (the file edited above it) is matched
by its name and file, in line order, where both sides hold the same number of them. What is left
appeared (only in the new run) or vanished (only in the base run).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Optional

MATCHED = ("JAX's op_name (less the scopes remat and calls add) and the source line, or, without op_name, "
           "the HLO fingerprint (opcode, shape, what a fusion computes)")
_STRUCTURE = frozenset({"while", "body", "cond"})


@dataclasses.dataclass(frozen=True)
class OpChange:
    """One op (a key's instructions) in both runs; an absent side is None."""
    name: str
    base: Optional[dict]            # the op table's entry in the base run
    new: Optional[dict]
    lines_moved: bool = False       # matched by name and file: its source line differs

    @property
    def source(self) -> Optional[str]:
        return (self.new or self.base or {}).get("source")

    @property
    def base_ms(self) -> float:
        return self.base["ms_per_step"] if self.base else 0.0

    @property
    def new_ms(self) -> float:
        return self.new["ms_per_step"] if self.new else 0.0

    @property
    def base_bytes(self) -> int:
        return self.base["peak_bytes"] if self.base else 0

    @property
    def new_bytes(self) -> int:
        return self.new["peak_bytes"] if self.new else 0

    @property
    def delta_ms(self) -> float:
        return self.new_ms - self.base_ms

    @property
    def delta_bytes(self) -> int:
        return self.new_bytes - self.base_bytes

    @property
    def time(self) -> str:
        """How its time per step changed: appeared, vanished, grew, shrank or same."""
        return _change(self.base_ms, self.new_ms)

    @property
    def memory(self) -> str:
        """How its bytes live at the memory peak changed (the same words)."""
        return _change(self.base_bytes, self.new_bytes)

    @property
    def time_ratio(self) -> Optional[float]:
        return self.new_ms / self.base_ms if self.base_ms and self.new_ms else None

    @property
    def label(self) -> str:
        return label(self.name)

    def to_json(self) -> dict[str, Any]:
        out = {"name": self.name, "label": self.label, "source": self.source, "time": self.time,
               "memory": self.memory, "base_ms_per_step": round(self.base_ms, 4),
               "new_ms_per_step": round(self.new_ms, 4), "delta_ms_per_step": round(self.delta_ms, 4),
               "ratio": round(self.time_ratio, 4) if self.time_ratio is not None else None,
               "base_peak_bytes": self.base_bytes, "new_peak_bytes": self.new_bytes,
               "base_instructions": list(self.base["instructions"]) if self.base else [],
               "new_instructions": list(self.new["instructions"]) if self.new else []}
        if self.lines_moved:
            out["base_source"] = self.base["source"]
        return out


def _change(base: float, new: float) -> str:
    if base == new:
        return "same"
    if not base:
        return "appeared"
    if not new:
        return "vanished"
    return "grew" if new > base else "shrank"


@dataclasses.dataclass(frozen=True)
class OpDiff:
    changed: tuple[OpChange, ...]   # every op whose time or peak bytes changed, most time changed first
    unchanged: int                  # ops the same on both sides
    missing: str = ""               # why no op could be compared ("": they were)

    def by_time(self) -> list[OpChange]:
        """The ops whose time per step changed, the largest change first."""
        return [c for c in self.changed if c.time != "same"]

    def by_memory(self) -> list[OpChange]:
        """The ops whose bytes live at the memory peak changed, the largest change first."""
        return sorted((c for c in self.changed if c.memory != "same"), key=lambda c: (-abs(c.delta_bytes), c.name))

    def grew_most(self, what: str, with_source: bool = False) -> Optional[OpChange]:
        """The op that grew (or appeared) most in `what`, "time" or "memory" (with_source: of those
        with a source line); None if none grew."""
        rows = self.by_time() if what == "time" else self.by_memory()
        grown = [c for c in rows if (c.delta_ms if what == "time" else c.delta_bytes) > 0
                 and (c.source or not with_source)]
        return grown[0] if grown else None

    def to_json(self) -> dict[str, Any]:
        return {"matched_by": MATCHED, "missing": self.missing or None, "unchanged": self.unchanged,
                "changed": [c.to_json() for c in self.changed]}


def diff(base: Optional[dict], new: Optional[dict]) -> OpDiff:
    """base, new: the op tables' JSON ({"steps", "ops", "why"}); None where a side recorded none (a
    baseline written before advisor recorded ops)."""
    if base is None or new is None:
        side = "the baseline" if base is None else "the new run"
        return OpDiff((), 0, f"{side} holds no ops (written before advisor recorded them): write it again "
                             "with --write-baseline to see which ops changed")
    for side, table in (("base", base), ("new", new)):
        if not table.get("ops"):
            return OpDiff((), 0, f"the {side} run: {table.get('why') or 'no ops recorded'}")
    b = {_key(e): e for e in base["ops"]}
    n = {_key(e): e for e in new["ops"]}
    rows = [OpChange(e["name"], b.get(k), e) for k, e in n.items() if k in b]
    rows += _moved([e for k, e in b.items() if k not in n], [e for k, e in n.items() if k not in b])
    changed = [c for c in rows if c.time != "same" or c.memory != "same"]
    changed.sort(key=lambda c: (-abs(c.delta_ms), -abs(c.delta_bytes), c.name, c.source or ""))
    return OpDiff(tuple(changed), len(rows) - len(changed))


def _key(entry: dict) -> tuple:
    return entry["name"], entry.get("source")


def _moved(base: list[dict], new: list[dict]) -> list[OpChange]:
    """The ops only one side holds by key: matched by name and file where both sides hold as many of
    them (the same ops, their lines moved), in line order; the rest appeared or vanished."""
    def groups(entries):
        out: dict = {}
        for e in entries:
            file, line = _file_line(e.get("source"))
            out.setdefault((e["name"], file), []).append((line, e))
        return {k: [e for _, e in sorted(v, key=lambda le: le[0])] for k, v in out.items()}

    gb, gn = groups(base), groups(new)
    rows = []
    for k in sorted(set(gb) | set(gn), key=str):
        bs, ns = gb.get(k, []), gn.get(k, [])
        if bs and len(bs) == len(ns) and k[1] is not None:
            rows += [OpChange(e["name"], be, e, lines_moved=True) for be, e in zip(bs, ns)]
        else:
            rows += [OpChange(e["name"], e, None) for e in bs] + [OpChange(e["name"], None, e) for e in ns]
    return rows


def _file_line(source: Optional[str]) -> tuple[Optional[str], int]:
    if not source or ":" not in source:
        return source, 0
    file, line = source.rsplit(":", 1)
    return file, int(line) if line.isdigit() else 0


def label(name: str) -> str:
    """A short name for an op: the last three scopes of its op_name, and the pass it is in (backward,
    forward, recomputed by remat); a fingerprint as it is."""
    if "/" not in name:
        return name
    parts = name.split("/")
    remat = "rematted_computation" in parts
    backward = any(p.startswith("transpose(") for p in parts)
    forward = not backward and any(p.startswith("jvp(") for p in parts)
    kept = [p for i, p in enumerate(parts)
            if p not in _STRUCTURE and p != "rematted_computation" and not p.endswith(".<lambda>")
            and not (i == 0 and p.startswith("jit(")) and "jvp(" not in p and not p.startswith("transpose(")]
    phase = "recomputed by remat" if remat else "backward" if backward else "forward" if forward else ""
    tail = "/".join(kept[-3:]) or "/".join(parts[-2:])      # an op of the loop itself: while/body
    return f"{tail} ({phase})" if phase else tail
