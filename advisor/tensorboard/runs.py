"""The profile runs of a logdir, named as the Profile plugin names them, without reading them.

A run is a folder `<tb run>/plugins/profile/<run>/` holding `.xplane.pb` files (one per host). Its
name is `<run>` when `<tb run>` is the logdir itself, else `<tb run>/<run>` (xprof's "frontend run
name", so a name opens the same run in both tabs).

`RunIndex` lists a logdir once and keeps the listing current from a thread: a request reads the
last listing and never walks the logdir (a page polls its run's status every second).
"""

from __future__ import annotations

import dataclasses
import os
import threading
import time
import weakref
from pathlib import Path
from typing import Optional

from ..locate import MEMORY_PROFILE, RUN_METADATA, TRACING_PREFIX, XPLANE_SUFFIX, RunFiles
from .cache import key_of, stamp_of

PROFILE_DIR = ("plugins", "profile")


@dataclasses.dataclass(frozen=True)
class Run:
    name: str                  # the Profile plugin's run name
    path: Path                 # the run folder
    hosts: tuple[str, ...]     # host names (file names less .xplane.pb)
    mtime: float               # the newest host file's modification time (s since the epoch)
    size: int                  # bytes in the host files
    stamps: tuple = ((), None, None)   # cache.stamp_of each file the analysis reads, as listed
    memory_profile: bool = False
    run_metadata: bool = False

    def to_json(self) -> dict:
        return {"name": self.name, "hosts": list(self.hosts), "mtime": self.mtime, "size": self.size}

    def files(self) -> RunFiles:
        """The run as locate.find_runs gives it, from what the listing already read."""
        xplanes = [self.path / f"{h}{XPLANE_SUFFIX}" for h in self.hosts]
        return RunFiles(xplanes[0], self.path / MEMORY_PROFILE if self.memory_profile else None,
                        self.path / RUN_METADATA if self.run_metadata else None,
                        tuple(xplanes) if len(xplanes) > 1 else ())

    def listed_key(self, settings: str) -> str:
        """The cache key of the run as listed (cache.run_key stats its files again)."""
        return key_of(self.stamps, settings)


def list_runs(logdir: str | Path) -> list[Run]:
    """Every profile run under `logdir`, newest first (one stat per file of a run, nothing read)."""
    root = Path(logdir)
    runs = []
    for tb_dir, dirs, _ in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith(TRACING_PREFIX))
        if Path(tb_dir).name != PROFILE_DIR[1] or Path(tb_dir).parent.name != PROFILE_DIR[0]:
            continue
        tb_run = Path(tb_dir).parent.parent.relative_to(root)
        for name in dirs:
            run = read_run(Path(tb_dir) / name, name if str(tb_run) == "." else f"{tb_run.as_posix()}/{name}")
            if run is not None:
                runs.append(run)
        dirs[:] = []     # a run folder holds no further runs
    return sorted(runs, key=lambda r: (-r.mtime, r.name))


def read_run(folder: Path, name: str) -> Optional[Run]:
    """The run in this folder as the listing names it, or None without a trace."""
    hosts, stamps, mtime, size = [], [], 0.0, 0
    side: dict[str, list] = {}
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
        for entry in entries:
            if entry.name.endswith(XPLANE_SUFFIX) and entry.is_file():
                st = entry.stat()
                hosts.append(entry.name[:-len(XPLANE_SUFFIX)])
                stamps.append(stamp_of(entry.path, st))
                mtime, size = max(mtime, st.st_mtime), size + st.st_size
            elif entry.name in (MEMORY_PROFILE, RUN_METADATA) and entry.is_file():
                side[entry.name] = stamp_of(entry.path, entry.stat())
    except OSError:
        return None
    if not hosts:
        return None
    return Run(name, folder, tuple(hosts), mtime, size, (tuple(stamps), side.get(MEMORY_PROFILE), side.get(RUN_METADATA)),
               MEMORY_PROFILE in side, RUN_METADATA in side)


def has_runs(logdir: str | Path) -> bool:
    """Whether any profile run is under `logdir` (stops at the first)."""
    root = Path(logdir)
    for tb_dir, dirs, _ in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(TRACING_PREFIX)]
        if Path(tb_dir).name == PROFILE_DIR[1] and Path(tb_dir).parent.name == PROFILE_DIR[0]:
            if any(read_run(Path(tb_dir) / d, d) for d in dirs):
                return True
            dirs[:] = []
    return False


class RunIndex:
    """A logdir's runs, listed when first asked for, then again by a thread every `interval` seconds
    (or 20 times as long as the last listing took, whichever is longer: at most about 5% of a core
    goes to listing). A run recorded meanwhile shows within that time, as in TensorBoard, which
    reloads its logdir every 5 s. `generation` changes whenever the listing does."""

    def __init__(self, logdir: str | Path, interval: float = 2.0):
        self.logdir = Path(logdir)
        self.interval = interval
        self.generation = 0
        self.listed_at = 0.0       # time.monotonic() of the last listing
        self._runs: list[Run] = []
        self._by_name: dict[str, Run] = {}
        self._lock = threading.Lock()
        self._first = threading.Lock()
        self._ready = threading.Event()
        self._took = 0.0

    def runs(self) -> list[Run]:
        self._start()
        return self._runs

    def get(self, name: Optional[str]) -> Optional[Run]:
        self._start()
        return self._by_name.get(name) if name else None

    def refresh(self) -> None:
        """List the logdir now."""
        t = time.monotonic()
        runs = list_runs(self.logdir)
        with self._lock:
            self._took = time.monotonic() - t
            if [(r.name, r.stamps) for r in runs] != [(r.name, r.stamps) for r in self._runs]:
                self._runs, self._by_name = runs, {r.name: r for r in runs}
                self.generation += 1
            self.listed_at = time.monotonic()

    def _start(self) -> None:
        """The first listing, made by the first request (the others wait for it), and the thread."""
        if self._ready.is_set():
            return
        with self._first:
            if not self._ready.is_set():
                self.refresh()
                threading.Thread(target=_watch, args=(weakref.ref(self),), name="advisor-runs", daemon=True).start()
                self._ready.set()


def _watch(ref: "weakref.ref[RunIndex]") -> None:
    """List again and again, for as long as the index is in use (its thread ends with it)."""
    while (index := ref()) is not None:
        pause = max(index.interval, 20 * index._took)
        del index
        time.sleep(pause)
        if (index := ref()) is None:
            return
        try:
            index.refresh()
        except OSError:     # the logdir went (for now): keep the last listing
            pass
        del index
