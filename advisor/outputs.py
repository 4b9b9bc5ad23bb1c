"""Where advisor writes: only where told, never onto what it reads, never half a file.

refuse_overwrite: an output path that is an input file, or inside a folder given to read (or the run
folder of a trace file given to read), is refused before anything runs (exit 2, one line).
atomic_open: an output is written to a temporary file beside it, then renamed over it, so an
interrupted or failed run leaves the previous file (or none), never a truncated one.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import urllib.parse
from pathlib import Path
from typing import Iterable, Optional

from .errors import AdvisorError

TRACE_SUFFIXES = (".xplane.pb",)


def _local(path) -> Optional[Path]:
    """A local path for a path or a file:// URL; None for other URLs (nothing local to protect)."""
    text = os.fspath(path)
    if "://" in text:
        if not text.startswith("file://"):
            return None
        text = urllib.parse.unquote(urllib.parse.urlsplit(text).path)
    return Path(text).resolve()


def refuse_overwrite(outputs: dict[str, object], inputs: Iterable[object]) -> None:
    """outputs: {flag: path or None}; inputs: what the command reads (paths or URLs)."""
    given = [(flag, _local(p)) for flag, p in outputs.items() if p is not None]
    seen: dict[Path, str] = {}
    for flag, out in given:
        if out in seen:
            raise AdvisorError(f"{seen[out]} and {flag} name the same file ({out}): give each its own")
        seen[out] = flag
    for raw in inputs:
        if raw is None:
            continue
        src = _local(raw)
        if src is None:
            continue
        for flag, out in given:
            if _same(out, src):
                raise AdvisorError(f"{flag} {out} is an input of this command: advisor never writes onto what "
                                   "it reads; give another path")
            folder = src if src.is_dir() else src.parent if src.name.endswith(TRACE_SUFFIXES) else None
            if folder is not None and folder in out.parents:
                raise AdvisorError(f"{flag} {out} is inside {folder}, which this command reads: advisor writes "
                                   "nothing into a trace folder; give a path outside it")


def _same(a: Path, b: Path) -> bool:
    if a == b:
        return True
    try:
        return a.exists() and b.exists() and os.path.samefile(a, b)
    except OSError:
        return False


@contextlib.contextmanager
def atomic_open(path, mode: str = "w"):
    """A file handle whose content replaces `path` only when the block ends without an error."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, mode, **({} if "b" in mode else {"encoding": "utf-8"})) as fh:
            yield fh
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_text(path, text: str) -> None:
    with atomic_open(path) as fh:
        fh.write(text)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
