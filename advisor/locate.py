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
    """One run: a run folder whose `.xplane.pb` files are its hosts (the first is read in full)."""
    xplane: Path
    memory_profile: Optional[Path]
    run_metadata: Optional[Path]
    hosts: tuple[Path, ...] = ()       # every host file of the run, `xplane` first; () means just `xplane`

    @property
    def host_files(self) -> tuple[Path, ...]:
        return self.hosts or (self.xplane,)

    @property
    def run_dir(self) -> Path:
        return self.xplane.parent


def host_name(xplane: Path) -> str:
    """The host a trace file describes: its name less `.xplane.pb` (jax.profiler names it so)."""
    return xplane.name[:-len(XPLANE_SUFFIX)] if xplane.name.endswith(XPLANE_SUFFIX) else xplane.stem


def find_runs(path: str | Path) -> list[RunFiles]:
    """Every run under `path`, sorted by path: the `.xplane.pb` files of one folder are the
    hosts of one run (a multi-host job writes one file per host into the same run folder)."""
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
    by_folder: dict[Path, list[Path]] = {}
    for f in files:
        by_folder.setdefault(f.parent, []).append(f)
    return [RunFiles(hosts[0], _beside(hosts[0], MEMORY_PROFILE), _beside(hosts[0], RUN_METADATA),
                     tuple(hosts) if len(hosts) > 1 else ())
            for hosts in by_folder.values()]


def _beside(xplane: Path, name: str) -> Optional[Path]:
    candidate = xplane.parent / name
    return candidate if candidate.is_file() else None
