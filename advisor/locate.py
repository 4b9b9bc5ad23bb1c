"""Find the runs under a path: a logdir, a run folder, or one `.xplane.pb`."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Optional

from .errors import AdvisorError
from .runner import MEMORY_PROFILE, RUN_METADATA, TRACING_PREFIX

XPLANE_SUFFIX = ".xplane.pb"


@dataclasses.dataclass(frozen=True)
class RunFiles:
    xplane: Path
    memory_profile: Optional[Path]
    run_metadata: Optional[Path]

    @property
    def run_dir(self) -> Path:
        return self.xplane.parent


def find_runs(path: str | Path) -> list[RunFiles]:
    """Every `.xplane.pb` under `path` (one per host per run), sorted by path."""
    p = Path(path)
    if not p.exists():
        raise AdvisorError(f"{p}: no such file or folder; give a logdir, a run folder or an .xplane.pb file")
    if p.is_file():
        if not p.name.endswith(XPLANE_SUFFIX):
            raise AdvisorError(f"{p}: not an .xplane.pb file; give a logdir, a run folder or an .xplane.pb file")
        files = [p]
    else:
        # A run-workload still tracing writes under a private folder: not a run yet.
        files = sorted(f for f in p.rglob(f"*{XPLANE_SUFFIX}")
                       if f.is_file() and not any(part.startswith(TRACING_PREFIX) for part in f.parts))
        if not files:
            raise AdvisorError(
                f"{p}: no .xplane.pb traces found; record one with jax.profiler.trace(logdir) "
                "or `advisor run-workload`, then point advisor at that logdir")
    return [RunFiles(f, _beside(f, MEMORY_PROFILE), _beside(f, RUN_METADATA)) for f in files]


def _beside(xplane: Path, name: str) -> Optional[Path]:
    candidate = xplane.parent / name
    return candidate if candidate.is_file() else None
