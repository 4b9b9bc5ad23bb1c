"""Analyses kept on disk, per run file and advisor version, in the user's cache directory
(ADVISOR_CACHE_DIR, else $XDG_CACHE_HOME/advisor, else ~/.cache/advisor): never in the logdir,
which the plugin only reads."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Optional

from .. import __version__
from ..locate import RunFiles


def cache_dir() -> Path:
    base = os.environ.get("ADVISOR_CACHE_DIR")
    if base:
        return Path(base) / "tensorboard"
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "advisor" / "tensorboard"


def _stamp(path: Optional[Path]) -> Optional[list]:
    if path is None:
        return None
    st = path.stat()
    return [str(path.resolve()), st.st_size, st.st_mtime_ns]


def run_key(run: RunFiles) -> str:
    """Changes when any file of the run changes (path, size, modification time) or advisor does."""
    parts = [__version__, [_stamp(p) for p in run.host_files], _stamp(run.memory_profile), _stamp(run.run_metadata)]
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:32]


def compare_key(base: str, new: str) -> str:
    return hashlib.sha256(json.dumps([__version__, "compare", base, new]).encode()).hexdigest()[:32]


def path_for(key: str) -> Path:
    return cache_dir() / f"{key}.json"


def read(key: str) -> Optional[dict]:
    try:
        return json.loads(path_for(key).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def write(key: str, doc: dict) -> Path:
    """Written to a temporary file then renamed: a reader never sees half a document."""
    target = path_for(key)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".tmp-", suffix=".json")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(doc, f)
    os.replace(tmp, target)
    return target
