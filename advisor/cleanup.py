"""Temporary folders that outlive nothing: removed on exit, on SIGTERM or SIGHUP (turned into
SystemExit, so every `finally` runs), and, for the runs killed outright (SIGKILL, a crash), swept
at the next start.

A folder's name carries its owner's process id (`advisor-<kind>-<pid>-<random>`): the sweep removes
those of processes that no longer exist, owned by this user and untouched for STALE_S.
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

STALE_S = 600     # a dead owner's folder is swept once it is this old (a shared /tmp may hold another
                  # machine's or container's live folders whose pids mean nothing here)
EXIT_INTERRUPTED = 130
TEMP_NAME = re.compile(r"advisor-[a-z]+-(\d+)-")
_live: set[str] = set()
_lock = threading.Lock()


def mkdtemp(kind: str) -> Path:
    """A private temporary folder, removed at exit if its user has not removed it."""
    return track(tempfile.mkdtemp(prefix=f"advisor-{kind}-{os.getpid()}-"))


def track(path) -> Path:
    """A folder removed at exit (or on a signal) unless `untrack`ed or `remove`d before."""
    with _lock:
        _live.add(str(path))
    return Path(path)


def untrack(path) -> None:
    with _lock:
        _live.discard(str(path))


def remove(path) -> None:
    shutil.rmtree(path, ignore_errors=True)
    with _lock:
        _live.discard(str(path))


@atexit.register
def _remove_all() -> None:
    with _lock:
        paths = list(_live)
        _live.clear()
    for path in paths:
        shutil.rmtree(path, ignore_errors=True)


def _on_signal(signum, frame):
    """Without JAX: unwind as an exception (every finally runs). With JAX loaded, an exception raised
    here may land in a callback XLA runs (a gc callback swallows it, compilation crashes on it: exit
    139), so the process ends at once, its folders removed first."""
    if "jax" in sys.modules:
        name = "interrupted" if signum == signal.SIGINT else f"stopped by {signal.Signals(signum).name}"
        _hard_exit(128 + signum, f"advisor: {name}")
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    raise SystemExit(128 + signum)


def install_signal_handlers(sigint: bool = False) -> None:
    """SIGTERM and SIGHUP (and SIGINT with sigint=True) end the process through _on_signal, where they
    would otherwise kill it on the spot. Only where nobody installed a handler of their own."""
    if threading.current_thread() is not threading.main_thread():
        return
    for name in ("SIGTERM", "SIGHUP") + (("SIGINT",) if sigint else ()):
        sig = getattr(signal, name, None)
        if sig is not None and signal.getsignal(sig) in (signal.SIG_DFL, signal.default_int_handler, None):
            signal.signal(sig, _on_signal)


def _hard_exit(code: int, message: str) -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    try:
        os.write(2, (message + "\n").encode())
    except OSError:
        pass
    _remove_all()
    os._exit(code)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True     # it exists, under another user
    return True


def sweep(root=None, pattern: re.Pattern = TEMP_NAME, now=None) -> list[str]:
    """Remove the advisor temporary folders (names matching `pattern`, the owner's pid its first
    group) of processes that are gone; returns their paths."""
    root = Path(root or tempfile.gettempdir())
    now = time.time() if now is None else now
    removed = []
    try:
        entries = list(os.scandir(root))
    except OSError:
        return removed
    uid = os.getuid() if hasattr(os, "getuid") else None
    for entry in entries:
        m = pattern.match(entry.name)
        if not m or int(m.group(1)) == os.getpid():
            continue
        try:
            st = entry.stat(follow_symlinks=False)
            if not entry.is_dir(follow_symlinks=False) or (uid is not None and st.st_uid != uid):
                continue
            if now - st.st_mtime < STALE_S or _alive(int(m.group(1))):
                continue
        except OSError:
            continue
        shutil.rmtree(entry.path, ignore_errors=True)
        removed.append(entry.path)
    return removed


def remove_folders_of(pid: int, root=None) -> list[str]:
    """Remove the temporary folders of a child process of ours that has ended (its parent knows it is
    gone: no waiting for STALE_S); returns their paths."""
    root = Path(root or tempfile.gettempdir())
    removed = []
    try:
        entries = list(os.scandir(root))
    except OSError:
        return removed
    for entry in entries:
        m = TEMP_NAME.match(entry.name)
        if m and int(m.group(1)) == pid and entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path, ignore_errors=True)
            removed.append(entry.path)
    return removed


def interrupted(message: str = "advisor: interrupted") -> None:
    """Ctrl-C that reached the command: one line, our folders removed, exit 130."""
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        pass
    print(message, file=sys.stderr, flush=True)
    _remove_all()
    raise SystemExit(EXIT_INTERRUPTED)
