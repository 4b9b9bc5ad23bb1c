"""The persistent compilation cache of the workloads advisor compiles (run-workload, sweep,
check --workload, --verify): JAX's own cache, in the user's cache directory.

A second identical run loads its programs instead of compiling them. The CLI decides (on, or
`--no-cache`) and says so in `ADVISOR_COMPILE_CACHE` (the directory, or "off"), so the processes
it starts (timing workers) follow the same choice; the Python API leaves JAX's settings alone
unless that variable is set. JAX evicts the least recently used entries beyond `MAX_BYTES`.

A program loaded from the cache is registered with the profiler under a new id, so its HLO sits
in the trace beside the id its ops carry; the loader pairs them (`load.loader`), and the run's
metadata records the hits, so a loaded program is never read as a fresh compile.

Programs compiled outside a trace (the pre-flight and compile-check estimates of configurations
not run, the timing workers of `check --workload`) are kept in a folder of their own, `untraced/`,
which no traced run reads: a trace needs the heap simulation that only a compile under the profiler
leaves (advisor/heap_traces.py), and an entry written without it would later load without it. An
estimate needs only the compiled program's memory analysis, which a loaded program gives the same.
The timing workers compile with their own XLA flags (one compute thread), which are part of JAX's
cache key; two workers of one configuration take turns (`one_compile`): the second loads what the
first compiled.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from pathlib import Path
from typing import Iterator, Optional

ENV = "ADVISOR_COMPILE_CACHE"
MAX_BYTES = 2 * 1024 ** 3          # JAX's LRU eviction keeps the folder under this size
_NEVER_S = 1e9                     # a minimum compile time no compile reaches: JAX writes nothing
_EVENTS = {"/jax/compilation_cache/cache_hits": "hits", "/jax/compilation_cache/cache_misses": "misses"}
_counts = {"hits": 0, "misses": 0, "saved_s": 0.0}
_listening = False


def default_dir() -> Path:
    """`$XDG_CACHE_HOME/advisor/jax`, or `~/.cache/advisor/jax`."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "advisor" / "jax"


def choose(enabled: bool) -> None:
    """The CLI's choice, for this process and the ones it starts."""
    os.environ[ENV] = str(default_dir()) if enabled else "off"


def directory() -> Optional[Path]:
    """The cache folder in use; None when off or not chosen."""
    value = os.environ.get(ENV, "")
    return None if value in ("", "off") else Path(value)


def untraced_dir() -> Optional[Path]:
    """The folder, inside the cache in use, of the programs compiled outside a trace; None when the
    cache is off."""
    path = directory()
    return None if path is None else path / "untraced"


@contextlib.contextmanager
def one_compile(folder: Optional[Path], key: str) -> Iterator[None]:
    """Held while a process compiles (or loads) the programs named by `key` into `folder`: a second
    process asking for the same key waits, then loads the first one's programs instead of compiling
    them again. A lock file per key (POSIX `flock`; elsewhere, and with the cache off, no wait)."""
    try:
        import fcntl
    except ImportError:
        fcntl = None
    if folder is None or fcntl is None:
        yield
        return
    folder.mkdir(parents=True, exist_ok=True)
    name = hashlib.sha256(key.encode()).hexdigest()[:32]
    with open(folder / f"{name}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@contextlib.contextmanager
def active(write: bool = True, folder: Optional[Path] = None) -> Iterator[Optional[Path]]:
    """JAX's compilation cache pointed at the chosen folder while the workload compiles and runs, and
    JAX's settings put back after (a process that goes on compiling other programs, a test session,
    keeps its own). Every program is cached, however quick its compile (JAX's default skips those
    under 1 s). Yields the folder, or None when the cache is off.

    write=False reads the cache only.

    folder: another folder inside the cache in use (`untraced_dir()`, for compiles outside a trace);
    ignored when the cache is off."""
    path = directory()
    if path is not None and folder is not None:
        path = folder
    if path is None:
        yield None
        return
    import jax
    from jax.experimental.compilation_cache import compilation_cache as jax_cache

    _listen()
    settings = {"jax_compilation_cache_dir": str(path),
                "jax_persistent_cache_min_compile_time_secs": 0.0 if write else _NEVER_S,
                "jax_persistent_cache_min_entry_size_bytes": -1, "jax_compilation_cache_max_size": MAX_BYTES}
    before = {name: getattr(jax.config, name) for name in settings}
    path.mkdir(parents=True, exist_ok=True)
    for name, value in settings.items():
        jax.config.update(name, value)
    jax_cache.reset_cache()      # JAX settles its cache at a process's first compile: take this folder
    try:
        yield path
    finally:
        for name, value in before.items():
            jax.config.update(name, value)
        jax_cache.reset_cache()


def counts() -> dict:
    """Programs loaded from the cache (hits), compiled and written to it (misses), and the compile
    time the hits saved (seconds, JAX's own figure), since this process started."""
    return dict(_counts)


def _listen() -> None:
    global _listening
    if _listening:
        return
    import jax.monitoring

    def on_event(event: str, **_):
        if event in _EVENTS:
            _counts[_EVENTS[event]] += 1

    def on_duration(event: str, duration: float, **_):
        if event == "/jax/compilation_cache/compile_time_saved_sec":
            _counts["saved_s"] += max(0.0, float(duration))

    jax.monitoring.register_event_listener(on_event)
    jax.monitoring.register_event_duration_secs_listener(on_duration)
    _listening = True
