"""The profile runs of a logdir, named as the Profile plugin names them, without reading them.

A run is a folder `<tb run>/plugins/profile/<run>/` holding `.xplane.pb` files (one per host). Its
name is `<run>` when `<tb run>` is the logdir itself, else `<tb run>/<run>` (xprof's "frontend run
name", so a name opens the same run in both tabs).
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Optional

from ..locate import XPLANE_SUFFIX, RunFiles, _beside
from ..runner import MEMORY_PROFILE, RUN_METADATA, TRACING_PREFIX

PROFILE_DIR = ("plugins", "profile")


@dataclasses.dataclass(frozen=True)
class Run:
    name: str                  # the Profile plugin's run name
    path: Path                 # the run folder
    hosts: tuple[str, ...]     # host names (file names less .xplane.pb)
    mtime: float               # the newest host file's modification time (s since the epoch)
    size: int                  # bytes in the host files

    def to_json(self) -> dict:
        return {"name": self.name, "hosts": list(self.hosts), "mtime": self.mtime, "size": self.size}

    def files(self) -> RunFiles:
        """The run as locate.find_runs gives it, from what the listing already read."""
        xplanes = [self.path / f"{h}{XPLANE_SUFFIX}" for h in self.hosts]
        return RunFiles(xplanes[0], _beside(xplanes[0], MEMORY_PROFILE), _beside(xplanes[0], RUN_METADATA),
                        tuple(xplanes) if len(xplanes) > 1 else ())


def list_runs(logdir: str | Path) -> list[Run]:
    """Every profile run under `logdir`, newest first (one stat per host file, nothing read)."""
    root = Path(logdir)
    runs = []
    for tb_dir, dirs, _ in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith(TRACING_PREFIX))
        if Path(tb_dir).name != PROFILE_DIR[1] or Path(tb_dir).parent.name != PROFILE_DIR[0]:
            continue
        tb_run = Path(tb_dir).parent.parent.relative_to(root)
        for name in dirs:
            run = _run(Path(tb_dir) / name, name if str(tb_run) == "." else f"{tb_run.as_posix()}/{name}")
            if run is not None:
                runs.append(run)
        dirs[:] = []     # a run folder holds no further runs
    return sorted(runs, key=lambda r: (-r.mtime, r.name))


def _run(folder: Path, name: str) -> Optional[Run]:
    hosts, mtime, size = [], 0.0, 0
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError:
        return None
    for entry in entries:
        if entry.name.endswith(XPLANE_SUFFIX) and entry.is_file():
            st = entry.stat()
            hosts.append(entry.name[:-len(XPLANE_SUFFIX)])
            mtime, size = max(mtime, st.st_mtime), size + st.st_size
    return Run(name, folder, tuple(hosts), mtime, size) if hosts else None


def has_runs(logdir: str | Path) -> bool:
    """Whether any profile run is under `logdir` (stops at the first)."""
    root = Path(logdir)
    for tb_dir, dirs, _ in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(TRACING_PREFIX)]
        if Path(tb_dir).name == PROFILE_DIR[1] and Path(tb_dir).parent.name == PROFILE_DIR[0]:
            if any(_run(Path(tb_dir) / d, d) for d in dirs):
                return True
            dirs[:] = []
    return False
