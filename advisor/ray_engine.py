"""`--engine ray`: every host file is a Ray task that reads it and reduces it to its part of the profile
model; a run of several hosts gets one more task that merges them and runs the rules, so only the run's
result (its result document, with Job.documents) comes back to the driver. The tasks call the loader's own steps
(load_first_host, load_host, merge_hosts), which is why the results are the default engine's."""

from __future__ import annotations

import logging
import os
import re
from typing import Iterator, Optional, Union

from .errors import AdvisorError
from .job import Job, Result, RunFailure, label, run_job
from .locate import RunFiles
from .model import Profile

RAY_CONNECT_TIMEOUT_S = 10
_NO_RAY = AdvisorError("--engine ray needs Ray: pip install ray (in advisor's clone: pip install -e '.[ray]')")
TIMEOUT_ENV = "ADVISOR_RAY_TIMEOUT_S"      # seconds without any task finishing before the rest fail
DEFAULT_TIMEOUT_S = 1800.0
MIN_FREE_CORES = 2        # a local Ray on fewer free cores is slower than the default engine: its runtime
                          # starts (seconds), and its workers compete with what keeps the cores busy
# The idle cores are read over SAMPLE_S, and over SETTLE_S more only where that reading is within
# NEAR cores of a count where the plan changes (x.5: the jobs are the idle cores rounded): beside a
# busy core, 6 runs take 2.6 s in all, and a flat 0.25 s sample was a tenth of it.
SAMPLE_S, SETTLE_S, NEAR = 0.1, 0.15, 0.2


def free_cores(sample_s: float = 0.25) -> float:
    """Cores of those this process may run on that are idle now (psutil's per-core busy share over
    `sample_s`)."""
    import psutil

    busy = psutil.cpu_percent(interval=sample_s, percpu=True)
    try:
        allowed = sorted(os.sched_getaffinity(0))
    except AttributeError:      # macOS, Windows
        allowed = range(len(busy))
    return sum(1 - busy[c] / 100 for c in allowed if c < len(busy))


def planned_free_cores() -> float:
    """free_cores() over SAMPLE_S, or over SAMPLE_S + SETTLE_S (their mean, weighted by time) where
    the first reading is near a count where the plan changes."""
    free = free_cores(SAMPLE_S)
    if abs(free % 1 - 0.5) < NEAR:
        free = (free * SAMPLE_S + free_cores(SETTLE_S) * SETTLE_S) / (SAMPLE_S + SETTLE_S)
    return free


def local_ray_plan(units, workers: int) -> tuple[int, Optional[str]]:
    """(CPUs for a local Ray, None), or (jobs for the default engine, why) when a local Ray would be
    the slower choice: fewer than MIN_FREE_CORES idle cores, or a single host file to read (then one
    run: the default engine reads it in this process, and the idle cores are not read)."""
    import importlib.util

    if importlib.util.find_spec("ray") is None:
        raise _NO_RAY
    tasks = sum(len(u.host_files) if isinstance(u, RunFiles) else 1 for u in units)
    free = planned_free_cores() if tasks >= 2 else 1.0
    usable = max(1, min(workers, int(free + 0.5)))
    if tasks >= 2 and free + 0.5 >= MIN_FREE_CORES:
        return usable, None
    why = (f"{tasks} host file to read" if tasks < 2 else
           f"{free:.1f} of {len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else os.cpu_count()} "
           "cores are idle")
    return usable, (f"--engine ray: {why}: a local Ray would be slower than the default engine (its runtime's "
                    f"start, and workers competing for busy cores), so the default engine runs with --jobs {usable}; "
                    "--ray-address local starts a local Ray anyway, --ray-address HOST:PORT joins a cluster")


def _timeout_s() -> float:
    text = os.environ.get(TIMEOUT_ENV, "")
    try:
        value = float(text) if text else DEFAULT_TIMEOUT_S
    except ValueError:
        raise AdvisorError(f"{TIMEOUT_ENV}={text!r}: expected a number of seconds") from None
    if value <= 0:
        raise AdvisorError(f"{TIMEOUT_ENV}={text!r}: expected a positive number of seconds")
    return value


def ray_results(units, job: Job, workers: int, address: Optional[str],
                progress) -> Iterator[tuple[int, list[Result]]]:
    """(index, results) of every unit as its tasks finish. Joins the cluster at `address`, else starts
    a local Ray for this call (and shuts it down after)."""
    try:
        import ray
    except ImportError:
        raise _NO_RAY from None
    timeout = _timeout_s()
    started = _start(ray, workers, address, progress)
    try:
        tasks = _Tasks(ray, os.getcwd())
        refs = {tasks.submit(unit, job): i for i, unit in enumerate(units)}
        progress(f"analyzing {len(units)} runs in {tasks.count} Ray tasks (one per host file, and one "
                 "per run of several hosts to merge them)")
        pending, done_count = list(refs), 0
        while pending:
            ready, pending = ray.wait(pending, num_returns=1, timeout=timeout)
            if not ready:     # nothing finished for `timeout` seconds: the runs still out fail, each named
                for ref in pending:
                    ray.cancel(ref, force=True)
                    unit = units[refs[ref]]
                    yield refs[ref], [RunFailure(label(unit), f"{label(unit)}: the Ray task analyzing it did "
                                                 f"not finish within {timeout:g} s (no run finished meanwhile; "
                                                 f"{TIMEOUT_ENV} sets the limit)")]
                return
            for ref in ready:
                i = refs[ref]
                done_count += 1
                try:
                    out = ray.get(ref)
                except ray.exceptions.RayTaskError as err:
                    if not isinstance(err.cause, ray.exceptions.RayError):
                        raise err.as_instanceof_cause() from None
                    out = _lost(units[i], err.cause)     # a task this one waited for was lost
                except ray.exceptions.RayError as err:   # the worker died, the node was lost
                    out = _lost(units[i], err)
                progress(f"analyzed {label(units[i])} ({done_count}/{len(units)})")
                yield i, out
    finally:
        if started:
            ray.shutdown()


def _lost(unit, err: Exception) -> list[Result]:
    return [RunFailure(label(unit), f"{label(unit)}: the Ray task analyzing it failed "
                       f"({type(err).__name__}: {_why(err)}); analyze this run alone to see the whole error")]


_ERROR_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt)\b")


def _why(err: Exception) -> str:
    """The error under a Ray failure, in one line (Ray's text is a traceback, the error last)."""
    lines = [line.strip() for line in re.sub(r"\x1b\[[0-9;]*m", "", str(err)).splitlines() if line.strip()]
    found = [line for line in lines if _ERROR_LINE.match(line)]
    return (found[-1] if found else lines[0] if lines else "no message")[:200]


class _Tasks:
    """The remote functions, made once per call (Ray exports each function when it is made remote).
    Each task is given the driver's folder: a relative path means there what it means here."""

    def __init__(self, ray, cwd: str):
        self.cwd = cwd
        self.run_job = ray.remote(run_unit)
        self.first_host = ray.remote(num_returns=2)(first_host)
        self.other_host = ray.remote(other_host)
        self.merge = ray.remote(merge)
        self.count = 0     # tasks submitted

    def submit(self, unit, job: Job):
        """The ref of the unit's results. A run under a URL stays one task: its files are fetched together."""
        if not isinstance(unit, RunFiles) or len(unit.host_files) == 1:
            self.count += 1
            return self.run_job.remote(self.cwd, unit, job)
        self.count += len(unit.host_files) + 1
        profile, reference = self.first_host.remote(self.cwd, unit, job.settings.steps, job.readers())
        # The reference goes in a list so that Ray does not wait for it before starting the task:
        # each other host is read while the first host (and its HLO) is still being read.
        parts = [self.other_host.remote(self.cwd, path, [reference], job.settings.steps)
                 for path in unit.host_files[1:]]
        return self.merge.remote(unit, job, profile, *parts)


def _enter(cwd: str) -> None:
    """Work in the driver's folder (the worker's own is its empty working_dir: see _start). Only the
    folder: it is not on the worker's sys.path. On another machine of a cluster it may not exist."""
    try:
        if os.getcwd() != cwd:
            os.chdir(cwd)
    except OSError:
        pass


def run_unit(cwd: str, unit, job: Job) -> list[Result]:
    _enter(cwd)
    return run_job(unit, job)


def first_host(cwd: str, run: RunFiles, steps=None, readers=None):
    """(the first host's profile, the HostReference the other hosts need), or (RunFailure, None)
    when it cannot be read: the run fails, as the default engine says."""
    from .load.loader import HostReference, load_first_host
    from .trace_head import check_trace_head

    _enter(cwd)
    try:
        check_trace_head(run.xplane)
        profile = load_first_host(run, steps, readers)
    except AdvisorError as err:
        return RunFailure(str(run.xplane), str(err)), None
    return profile, HostReference.of(profile)


def other_host(cwd: str, path, boxed_reference: list, steps=None):
    """Another host file's HostPart; the first host's HostReference is fetched once this file is read."""
    import ray

    from .load.loader import load_host

    _enter(cwd)
    return load_host(path, lambda: ray.get(boxed_reference[0]), steps)


def merge(run: RunFiles, job: Job, first: Union[Profile, RunFailure], *parts) -> list[Result]:
    """The run's hosts merged and the rules run: what run_job gives for a local run."""
    from .load.loader import merge_hosts

    if isinstance(first, RunFailure):
        return [first]
    try:
        analysis = job.analyze(merge_hosts(first, list(parts)))
    except AdvisorError as err:
        return [RunFailure(str(run.xplane), str(err))]
    return [job.result(analysis)]


def _start(ray, workers: int, address: Optional[str], progress) -> bool:
    """Whether this call started Ray (joining the cluster at `address`, else a local Ray): then it shuts it down."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    if ray.is_initialized():
        return False
    if address:
        _check_reachable(address)
    from . import cleanup
    empty = cleanup.mkdtemp("ray")     # uploaded by ray.init: not needed after it
    quiet = {"include_dashboard": False, "logging_level": logging.ERROR, "log_to_driver": False,
             **_isolated(empty)}
    try:
        if address == "local":      # a new local Ray, even where the default engine would be faster
            progress(f"starting a local Ray with {workers} CPUs")
            ray.init(address="local", num_cpus=workers, **quiet)
        elif address:
            progress(f"joining the Ray cluster at {address}")
            _use_token_if_present()
            ray.init(address=address, **quiet)
        else:
            progress(f"starting a local Ray with {workers} CPUs")
            ray.init(num_cpus=workers, **quiet)
    except Exception as err:  # noqa: BLE001 - Ray raises ConnectionError, RuntimeError, ValueError...
        lines = str(err).strip().splitlines()
        where = f"the Ray cluster at {address}" if address else "a local Ray"
        hint = ""
        if address not in (None, "local") and os.environ.get(AUTH_MODE_ENV) != "token":
            hint = (f" (a cluster started by `ray start` 2.5x and later asks for a token: set {AUTH_MODE_ENV}=token "
                    "and RAY_AUTH_TOKEN, or copy the head's ~/.ray/auth_token here)")
        raise AdvisorError(f"cannot start or join {where}: {lines[0][:200] if lines else type(err).__name__}{hint}") \
            from None
    finally:
        cleanup.remove(empty)
    return True


def _isolated(empty) -> dict:
    """Ray puts the driver's working folder on every worker's sys.path (its job's py_driver_sys_path),
    where a `json.py`, or the clone's own `advisor/` (which has no `rules`), would be imported instead
    of the installed package's, unless the job has a working_dir: give it an empty one (the tasks
    still read relative paths from the driver's folder: _enter). Not under `ray job submit`, whose
    job has chosen its own."""
    if "RAY_JOB_CONFIG_JSON_ENV_VAR" in os.environ:
        return {}
    return {"runtime_env": {"working_dir": str(empty)}}


AUTH_MODE_ENV = "RAY_AUTH_MODE"


def _use_token_if_present() -> None:
    """Since Ray 2.5x, `ray start` turns token authentication on where a token exists (a new local
    `ray.init()` writes one to ~/.ray/auth_token), but `ray.init(address=...)` sends it only when
    RAY_AUTH_MODE=token: where the user has not chosen a mode and has a token (RAY_AUTH_TOKEN,
    RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token), send it, as Ray's own CLI does. Without this, joining
    fails with "Failed to connect"."""
    if AUTH_MODE_ENV in os.environ:
        return
    path = os.environ.get("RAY_AUTH_TOKEN_PATH") or os.path.join(os.path.expanduser("~"), ".ray", "auth_token")
    if os.environ.get("RAY_AUTH_TOKEN") or os.path.isfile(path):
        os.environ[AUTH_MODE_ENV] = "token"
        try:     # Ray read its configuration when it was imported: read it again (what Ray's CLI does)
            from ray._raylet import Config
            Config.initialize("")
        except (ImportError, AttributeError):
            pass


def _check_reachable(address: str) -> None:
    """A Ray cluster's host:port that does not answer is one clear error now, rather than Ray retrying
    for minutes ("auto" and "local" are Ray's own to resolve)."""
    import socket

    host_port = address.split("://", 1)[-1].rstrip("/")
    if address in ("auto", "local") or ":" not in host_port:
        return
    host, _, port = host_port.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=RAY_CONNECT_TIMEOUT_S):
            pass
    except (OSError, ValueError) as err:
        raise AdvisorError(f"--ray-address {address}: no Ray cluster answers there ({err}); start one with "
                           "`ray start --head`, or leave out --ray-address for a local Ray") from None
