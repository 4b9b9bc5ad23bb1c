"""The mesh of a run: its axes as (size, stride) over the device order, named as the run recorded
them, as the user gave them (--mesh), or inferred from the device groups its collectives run in
(the HLO keeps the replica groups and source-target pairs, not the axes' names)."""

from __future__ import annotations

import dataclasses
from typing import Optional

from ...model import Instruction, Profile


@dataclasses.dataclass(frozen=True)
class Axis:
    name: str
    size: int
    stride: int         # in the device order: device d's coordinate is (d // stride) % size

    def coordinate(self, device: int) -> int:
        return (device // self.stride) % self.size


DATA_NAMES, MODEL_NAMES = ("data", "dp", "batch", "replica", "fsdp"), ("tensor", "model", "tp", "mp")


def parse_mesh(value) -> list[tuple[str, int]]:
    """A mesh's axes, major first, as [(name, size), ...], from "data=2,pipe=2,tensor=2", a
    {name: size} mapping, [[name, size], ...] or a jax.sharding.Mesh. ValueError if it is none of them."""
    shape = getattr(value, "shape", None)
    if shape is not None and hasattr(value, "axis_names"):      # a jax.sharding.Mesh
        value = dict(shape)
    if isinstance(value, str):
        pairs = [p.split("=", 1) for p in value.split(",") if p.strip()]
        if not pairs or any(len(p) != 2 for p in pairs):
            raise ValueError(f"expected NAME=SIZE,... (e.g. data=2,pipe=2,tensor=2), got {value!r}")
        value = [(k.strip(), v.strip()) for k, v in pairs]
    items = list(value.items()) if isinstance(value, dict) else list(value or [])
    out = []
    for item in items:
        if not isinstance(item, (list, tuple)) or len(item) != 2:
            raise ValueError(f"expected (name, size) pairs, got {item!r}")
        name, size = str(item[0]), item[1]
        try:
            size = int(size)
        except (TypeError, ValueError):
            raise ValueError(f"axis {name!r}: size {size!r} is not a whole number") from None
        if not name or size < 1 or isinstance(item[1], bool):
            raise ValueError(f"axis {name!r}: needs a name and a size of at least 1")
        out.append((name, size))
    if not out or len({n for n, _ in out}) != len(out):
        raise ValueError("a mesh needs at least one axis, each named once")
    return out


def named_mesh(profile: Profile, mesh) -> tuple[Optional[list[tuple[str, int]]], str, list[str]]:
    """The mesh given, else the one recorded with the run, where it source, and the run's notes on it."""
    if mesh:
        return parse_mesh(mesh), "given", []
    recorded = profile.run_metadata.get("mesh")
    if recorded:
        try:
            return parse_mesh(recorded), "recorded", []
        except ValueError as err:
            return None, "inferred", [f"the mesh recorded with the run is not usable ({err}); its axes are inferred"]
    return None, "inferred", []


def axes_from(named: list[tuple[str, int]]) -> list[Axis]:
    """Axes of a named mesh, major first (the device order of `Mesh(devices.reshape(sizes), names)`)."""
    out, stride = [], 1
    for name, size in reversed(named):
        out.append(Axis(name, size, stride))
        stride *= size
    return [a for a in reversed(out) if a.size > 1]


def groups(ins: Instruction) -> tuple[tuple[int, ...], ...]:
    """The device groups a collective runs in; a permute's are the connected sets of its pairs."""
    if ins.source_target_pairs:
        parent: dict[int, int] = {}

        def find(x):
            while parent.setdefault(x, x) != x:
                x = parent[x]
            return x
        for s, t in ins.source_target_pairs:
            parent[find(s)] = find(t)
        sets: dict[int, list[int]] = {}
        for d in list(parent):
            sets.setdefault(find(d), []).append(d)
        return tuple(tuple(sorted(v)) for v in sets.values())
    return tuple(g for g in ins.replica_groups if len(g) > 1)


def _progression(group: tuple[int, ...]) -> Optional[tuple[int, int]]:
    """(size, stride) of a group whose sorted ids are evenly spaced, else None."""
    if len(group) < 2:
        return None
    stride = group[1] - group[0]
    if stride <= 0 or any(b - a != stride for a, b in zip(group, group[1:])):
        return None
    return len(group), stride


def infer_axes(collectives: list[Instruction], n: int) -> list[Axis]:
    """The mesh's axes as (size, stride), from the groups that are one axis (evenly spaced ids),
    composites of smaller axes left out, gaps filled so the sizes multiply to the device count."""
    found = {p for i in collectives for g in groups(i) if (p := _progression(g))}
    kept: set[tuple[int, int]] = set()
    for size, stride in sorted(found):
        # a group over a known axis and more: the known axis, and the rest as an axis of its own
        while size > 1 and (size, stride) not in kept:
            inner = next(((k, t) for k, t in sorted(kept) if t == stride and size % k == 0 and k < size), None)
            if inner is None:
                kept.add((size, stride))
                break
            size, stride = size // inner[0], stride * inner[0]
    # a tiling of the device order: strides chain (each axis starts where the smaller ones end)
    axes, expected = [], 1
    for size, stride in sorted(kept, key=lambda a: a[1]):
        if stride < expected or stride % expected:
            return [Axis(f"axis{size}s{stride}", size, stride) for size, stride in sorted(kept, key=lambda a: -a[1])]
        if stride > expected:
            axes.append((stride // expected, expected))
        axes.append((size, stride))
        expected = size * stride
    if expected < n and n % expected == 0:
        axes.append((n // expected, expected))
    return [Axis(f"axis{size}s{stride}", size, stride) for size, stride in sorted(axes, key=lambda a: -a[1])]


def spanned(ins: Instruction, axes: list[Axis]) -> list[Axis]:
    """The axes along which the devices of a collective's groups differ."""
    out = []
    sets = groups(ins)
    for a in axes:
        if any(len({a.coordinate(d) for d in g}) > 1 for g in sets):
            out.append(a)
    return out
