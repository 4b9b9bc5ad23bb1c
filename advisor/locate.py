"""Find the runs under a path: a logdir, a run folder, or one `.xplane.pb`, on this machine or under
an fsspec URL (gs://, s3://, memory://, file://), from which a run's files are fetched to read it."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import posixpath
import re
import urllib.parse
from pathlib import Path
from typing import Iterator, Optional

from .errors import AdvisorError

# What a run folder holds beside its hosts' traces (run-workload and advisor.trace write them).
XPLANE_SUFFIX = ".xplane.pb"
RUN_METADATA = "advisor_run.json"
MEMORY_PROFILE = "memory.prof"
TRACING_PREFIX = ".advisor-tracing-"     # a run-workload's private logdir while it traces: never a run


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


# --- remote logdirs: gs://, s3://, memory://, any fsspec URL -------------------------------------

_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+://")


def is_url(path: str | Path) -> bool:
    """`gs://...`, `s3://...`, `file://...`: anything with a scheme (a Path never has one)."""
    return isinstance(path, str) and bool(_URL.match(path))


def file_url_path(url: str) -> Optional[Path]:
    """The local path of a `file://` URL, None for any other scheme."""
    parsed = urllib.parse.urlsplit(url)
    if parsed.scheme.lower() != "file":
        return None
    if parsed.netloc not in ("", "localhost"):
        raise AdvisorError(f"{url}: a file:// URL names a path on this machine (file:///path or "
                           f"file://localhost/path), not on host {parsed.netloc!r}")
    return Path(urllib.parse.unquote(parsed.path))


@dataclasses.dataclass(frozen=True)
class RemoteRun:
    """One run folder under a URL: the files to fetch to read it (its traces and the files beside them)."""
    url: str                    # the folder, as a URL with its scheme
    files: tuple[str, ...]      # names of the files in it that advisor reads

    @property
    def process_local(self) -> bool:
        """memory:// lives in this process only: a worker process or a Ray task cannot read it."""
        return self.url.startswith("memory://")

    def __str__(self) -> str:
        return self.url


_BACKEND_LOGGERS = ("fsspec", "gcsfs", "s3fs", "aiobotocore", "botocore", "adlfs", "azure", "google.auth")


def _filesystem(url: str):
    """(fsspec filesystem, path inside it) of a URL, or one clear AdvisorError."""
    try:
        import fsspec
    except ImportError:
        raise AdvisorError(f"{url}: reading URLs needs fsspec: pip install fsspec (and the backend for the "
                           "scheme: gcsfs for gs://, s3fs for s3://)") from None
    for name in _BACKEND_LOGGERS:      # their retries log tracebacks; advisor says it in one line
        logging.getLogger(name).setLevel(logging.CRITICAL)
    try:
        return fsspec.core.url_to_fs(url)
    except ImportError as err:
        raise AdvisorError(f"{url}: no filesystem backend for this scheme ({_first_line(err)}); "
                           "install it, e.g. pip install gcsfs for gs:// or s3fs for s3://") from None
    except Exception as err:  # noqa: BLE001 - fsspec raises ValueError, KeyError... for a bad URL
        raise AdvisorError(f"{url}: not a URL advisor can read ({_first_line(err)}); give a logdir, "
                           "a run folder or an .xplane.pb as a path or an fsspec URL (gs://, s3://, file://)") from None


def _first_line(err: BaseException) -> str:
    lines = str(err).strip().splitlines()
    return lines[0][:200] if lines else type(err).__name__


def normalize_url(url: str) -> str:
    """`.` and `..` segments folded in the URL's own path (the first link of a chain such as
    `tar://logdir::file:///runs.tar`): fsspec passes them through, and a fetched folder named `.`
    or `..` cannot be made."""
    head, sep, chain = url.partition("::")
    scheme, _, path = head.partition("://")
    if path and any(part in (".", "..") for part in path.split("/")):
        folded = posixpath.normpath(path)
        if folded.startswith("..") or path.startswith("/") != folded.startswith("/"):
            raise AdvisorError(f"{url}: its `..` segments climb above the URL's root; give the folder itself")
        path = "" if folded == "." else folded + ("/" if path.endswith("/") else "")
    return f"{scheme}://{path}{sep}{chain}"


def url_join(url: str, sub: str) -> str:
    """url/sub, in the first link of a chained URL (`tar://a::file:///x.tar` + `/b` is
    `tar://a/b::file:///x.tar`)."""
    head, sep, chain = url.partition("::")
    scheme, _, path = head.partition("://")
    path = path.rstrip("/")
    sub = sub.strip("/")
    joined = f"{path}/{sub}" if path and sub else path or sub
    return f"{scheme}://{joined}{sep}{chain}"


def _url_parent(url: str) -> str:
    head, sep, chain = url.partition("::")
    return head.rsplit("/", 1)[0] + sep + chain


def find_remote_runs(url: str) -> list[RemoteRun]:
    """The run folders under a URL that hold `.xplane.pb` traces, sorted by URL; nothing is written there."""
    url = normalize_url(url)
    fs, root = _filesystem(url)
    try:
        info = fs.info(root)
        if info.get("type") != "directory":
            if not root.endswith(XPLANE_SUFFIX):
                raise AdvisorError(f"{url}: not an .xplane.pb file; give a logdir, a run folder or an .xplane.pb file")
            folder = root.rsplit("/", 1)[0]
            names = [root.rsplit("/", 1)[1]]
            beside = set(_names(fs.ls(folder, detail=False)))
            names += [n for n in (MEMORY_PROFILE, RUN_METADATA) if n in beside]
            return [RemoteRun(_url_parent(url), tuple(names))]
        found = fs.find(root)
    except AdvisorError:
        raise
    except FileNotFoundError:
        raise AdvisorError(f"{url}: no such file or folder; give a logdir, a run folder or an .xplane.pb file") \
            from None
    except PermissionError as err:
        raise AdvisorError(f"{url}: no permission to read it ({_first_line(err)}); check the credentials "
                           "of its filesystem backend") from None
    except Exception as err:  # noqa: BLE001 - each backend raises its own (auth, network, missing bucket)
        raise AdvisorError(f"{url}: cannot list it ({type(err).__name__}: {_first_line(err)})") from None
    folders: dict[str, list[str]] = {}
    for f in sorted(found):
        if f.endswith(XPLANE_SUFFIX) and not any(part.startswith(TRACING_PREFIX) for part in f.split("/")):
            folders.setdefault(f.rsplit("/", 1)[0], []).append(f.rsplit("/", 1)[1])
    if not folders:
        raise AdvisorError(f"{url}: no .xplane.pb traces found; record one with jax.profiler.trace(logdir) "
                           "or `advisor run-workload`, then point advisor at that logdir")
    present = set(found)
    root = root.rstrip("/")
    return [RemoteRun(url_join(url, folder[len(root):]) if folder.startswith(root) else fs.unstrip_protocol(folder),
                      tuple(xplanes + [n for n in (MEMORY_PROFILE, RUN_METADATA) if f"{folder}/{n}" in present]))
            for folder, xplanes in sorted(folders.items())]


def _names(paths) -> list[str]:
    return [p.rstrip("/").rsplit("/", 1)[-1] for p in paths]


@contextlib.contextmanager
def fetched(run: RemoteRun) -> Iterator[Path]:
    """The run's files copied into a private temporary folder (removed after): the loader reads local files."""
    fs, folder = _filesystem(run.url)
    from . import cleanup
    tmp = cleanup.mkdtemp("fetch")
    try:
        local = tmp / (folder.rstrip("/").rsplit("/", 1)[-1].strip(".") or "run")
        local.mkdir()
        for name in run.files:
            try:
                fs.get_file(f"{folder.rstrip('/')}/{name}", str(local / name))
            except Exception as err:  # noqa: BLE001 - network, auth, a file removed since listing
                raise AdvisorError(f"{run.url}/{name}: cannot read it ({type(err).__name__}: "
                                   f"{_first_line(err)})") from None
        yield local
    finally:
        cleanup.remove(tmp)


def find_units(path: str | Path) -> list:
    """What the engine analyzes one at a time (one job each): a local run (RunFiles) or a remote
    run folder (RemoteRun), sorted by path. `file://` URLs are read as the local path they name."""
    if is_url(path):
        local = file_url_path(str(path))
        return find_runs(local) if local is not None else find_remote_runs(str(path))
    return find_runs(path)
