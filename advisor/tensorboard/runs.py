"""The profile runs of a logdir, named as the Profile plugin names them, without reading them.

A run is a folder `<tb run>/plugins/profile/<run>/` holding `.xplane.pb` files (one per host). Its
name is `<run>` when `<tb run>` is the logdir itself, else `<tb run>/<run>` (xprof's "frontend run
name", so a name opens the same run in both tabs).

`RunIndex` lists a logdir once and keeps the listing current from a thread: a request reads the
last listing and never walks the logdir (a page polls its run's status every second).

A run is dated when it was recorded, not when its files were last written (a clone, a copy or an
unpacked archive gives every file the same time): by its folder's name as jax.profiler writes it
(`YYYY_MM_DD_HH_MM_SS`, the recording machine's local time), else by its advisor_run.json's
`created`, else by its newest host file's modification time.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import json
import os
import re
import threading
import time
import weakref
from pathlib import Path
from typing import Optional

from ..locate import MEMORY_PROFILE, RUN_METADATA, TRACING_PREFIX, XPLANE_SUFFIX, RunFiles
from .cache import key_of, stamp_of

PROFILE_DIR = ("plugins", "profile")
FOLDER_TIME = re.compile(r"(\d{4})_(\d\d)_(\d\d)_(\d\d)_(\d\d)_(\d\d)(?![0-9])")    # jax.profiler's run folder
MAX_METADATA = 1 << 20      # advisor_run.json is a few KB; a larger one is not advisor's
# Run.recorded_from -> where the date comes from, as the run list says it
DATED_BY = {"folder": "from the run folder's name, as jax.profiler wrote it (the recording machine's local time)",
            "metadata": "from advisor_run.json's created (the run folder's name holds no date)",
            "mtime": "the trace file's modification time: neither the run folder's name nor an "
                     "advisor_run.json says when the run was recorded (a copy or a clone changes it)"}


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
    recorded: float = 0.0      # when the run was recorded (s since the epoch): see recorded_from
    recorded_from: str = "mtime"   # a key of DATED_BY

    def to_json(self) -> dict:
        return {"name": self.name, "hosts": list(self.hosts), "mtime": self.mtime, "size": self.size,
                "recorded": self.recorded, "recorded_from": self.recorded_from}

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
    """Every profile run under `logdir`, newest recorded first (one stat per file of a run; a run's
    advisor_run.json read only where its folder's name holds no date)."""
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
    return sorted(runs, key=lambda r: (-r.recorded, r.name))


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
    recorded, dated_by = folder_time(folder.name), "folder"
    if recorded is None and RUN_METADATA in side:
        recorded, dated_by = _created(*side[RUN_METADATA][:3]), "metadata"
    if recorded is None:
        recorded, dated_by = mtime, "mtime"
    return Run(name, folder, tuple(hosts), mtime, size,
               (tuple(stamps), side.get(MEMORY_PROFILE), side.get(RUN_METADATA)),
               MEMORY_PROFILE in side, RUN_METADATA in side, recorded, dated_by)


def folder_time(name: str) -> Optional[float]:
    """The time a run folder's name gives (`2026_11_21_23_52_05`, with or without a suffix; read as
    local time, as jax.profiler writes it), else None."""
    m = FOLDER_TIME.match(name)
    if m is None:
        return None
    try:
        return datetime.datetime(*map(int, m.groups())).timestamp()
    except (ValueError, OverflowError, OSError):
        return None


@functools.lru_cache(maxsize=4096)
def _created(path: str, size: int, mtime_ns: int) -> Optional[float]:
    """advisor_run.json's `created` (an ISO time) as seconds since the epoch, else None; read once per
    state of the file (the listing runs every few seconds). The file is a stranger's: bounded, and
    anything but an ISO time is no date."""
    if size > MAX_METADATA:
        return None
    try:
        with open(path, "rb") as fh:
            created = json.loads(fh.read(MAX_METADATA + 1)).get("created")
        return datetime.datetime.fromisoformat(created).timestamp()
    except (OSError, ValueError, RecursionError, TypeError, AttributeError, OverflowError):
        return None


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
