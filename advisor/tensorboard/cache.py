"""Analyses kept on disk, per run file and advisor version, in the user's cache directory
(ADVISOR_CACHE_DIR, else $XDG_CACHE_HOME/advisor, else ~/.cache/advisor): never in the logdir,
which the plugin only reads. Bounded: past ADVISOR_CACHE_MAX_MB (default 256) the documents used
least recently go (a document is about 60 KB: its charts are SVG)."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Optional

from ..locate import RunFiles
from ..version import __version__


def cache_dir() -> Path:
    base = os.environ.get("ADVISOR_CACHE_DIR")
    if base:
        return Path(base) / "tensorboard"
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "advisor" / "tensorboard"


def stamp_of(path, st: os.stat_result) -> list:
    """What identifies one state of a file. The change time and the inode too, not only size and
    modification time: a file cut short and then restored with its bytes and modification time (tar,
    `cp -p`, `rsync -t`) keeps those two, but its change time moves, and a file replaced gets a new inode."""
    return [os.path.abspath(path), st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]


def _stamp(path: Optional[Path]) -> Optional[list]:
    return None if path is None else stamp_of(path, path.stat())


def run_stamps(run: RunFiles) -> tuple:
    """The stamps of the run's files now (OSError if one went)."""
    return (tuple(_stamp(p) for p in run.host_files), _stamp(run.memory_profile), _stamp(run.run_metadata))


def key_of(stamps: tuple, settings: str = "{}") -> str:
    """Changes when any file of the run changes (see stamp_of), when advisor does, or the project's
    rule settings (a JSON string)."""
    hosts, memory_profile, run_metadata = stamps
    parts = [__version__, list(hosts), memory_profile, run_metadata, settings]
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:32]


def run_key(run: RunFiles, settings: str = "{}") -> str:
    """The key of the run's files as they are now."""
    return key_of(run_stamps(run), settings)


def compare_key(base: str, new: str) -> str:
    return hashlib.sha256(json.dumps([__version__, "compare", base, new]).encode()).hexdigest()[:32]


def path_for(key: str) -> Path:
    return cache_dir() / f"{key}.json"


def brief_path(key: str) -> Path:
    """What the run list shows of an analysis (its findings' severities), beside the document."""
    return cache_dir() / f"{key}.brief"


def read_brief(key: str) -> Optional[dict]:
    try:
        return json.loads(brief_path(key).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def read(key: str) -> Optional[dict]:
    path = path_for(key)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        os.utime(path)          # used now: trimmed last
    except (OSError, ValueError):
        return None
    return doc


def trim(limit_bytes: Optional[int] = None) -> None:
    """Remove the documents used least recently until the cache holds at most limit_bytes."""
    if limit_bytes is None:
        try:
            limit_bytes = int(float(os.environ.get("ADVISOR_CACHE_MAX_MB", "256")) * 2**20)
        except ValueError:
            limit_bytes = 256 * 2**20
    entries = []
    for p in cache_dir().glob("*.json"):
        try:
            st = p.stat()
        except OSError:
            continue
        entries.append((st.st_mtime, st.st_size, p))
    total = sum(size for _, size, _ in entries)
    for _, size, p in sorted(entries):
        if total <= limit_bytes:
            break
        try:
            p.unlink()
            brief_path(p.stem).unlink(missing_ok=True)
        except OSError:
            continue
        total -= size


def _write(target: Path, doc: dict) -> None:
    """Written to a temporary file then renamed: a reader never sees half a document."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".tmp-", suffix=".json")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(doc, f)
    os.replace(tmp, target)


def write(key: str, doc: dict, brief: Optional[dict] = None) -> Path:
    """The document, and its brief first (a document without its brief only lists as not analyzed)."""
    if brief is not None:
        _write(brief_path(key), brief)
    _write(path_for(key), doc)
    trim()
    return path_for(key)
