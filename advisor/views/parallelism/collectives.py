"""The collectives per step on one device, by axis, kind and role: count, bytes, time and exposed
time (measured per collective: its time with no compute of the device beside it)."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from ...model import HloModule, Profile
from .. import activity


@dataclasses.dataclass
class CollectiveRow:
    """The collectives of one kind and role over one set of axes, per step on one device."""
    axis: str
    axis_size: int
    kind: str
    role: str
    count_per_step: float
    bytes_per_step: int
    time_s: float
    exposed_s: float
    instructions: list[str]

    def to_json(self) -> dict[str, Any]:
        return {"axis": self.axis, "axis_size": self.axis_size, "kind": self.kind, "role": self.role,
                "count_per_step": round(self.count_per_step, 3), "bytes_per_step": self.bytes_per_step,
                "time_s": round(self.time_s, 6), "exposed_s": round(self.exposed_s, 6)}


def rows(profile: Profile, module: HloModule, collectives, roles, spans, label) -> list[CollectiveRow]:
    devices = activity.of(profile).devices
    steps = max(1, len(profile.steps))
    first = profile.hosts[0].devices if profile.hosts else devices
    counts = {o.name: o.count / steps / max(1, len(first)) for o in profile.ops if o.module == profile.step_module}
    rows: dict[tuple[str, str, str], CollectiveRow] = {}
    for ins in collectives:
        having = [d for d in devices if ins.name in d.collectives]
        time_ns = sum(d.collectives[ins.name] for d in having) / len(having) if having else 0.0
        # measured per collective: its time with no compute of the device beside it
        exposed_ns = sum(max(0.0, d.collectives[ins.name] - d.collective_hidden.get(ins.name, 0.0))
                         for d in having) / len(having) if having else 0.0
        per_step = counts.get(ins.name, 0.0)
        size = math.prod(a.size for a in spans[ins.name]) or 1
        key = (label[ins.name], ins.collective, roles[ins.name])
        row = rows.get(key) or CollectiveRow(label[ins.name] or "?", size, ins.collective, roles[ins.name],
                                             0.0, 0, 0.0, 0.0, [])
        row.count_per_step += per_step
        row.bytes_per_step += int(ins.bytes_moved(size) * per_step)
        row.time_s += time_ns / 1e9
        row.exposed_s += exposed_ns / 1e9
        row.instructions.append(ins.name)
        rows[key] = row
    return sorted(rows.values(), key=lambda r: (-r.time_s, r.axis, r.kind))
