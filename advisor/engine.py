"""Every run under a path, analyzed by one of the engines: the pipeline behind every command.

`locate.find_units` lists the runs; each is one job (advisor/job.py: load, bind the settings,
views, rules, result), run in this process, in worker processes (`--jobs`) or as Ray tasks
(`--engine ray`, advisor/ray_engine.py); the results come back in the order of the runs' paths,
whichever engine ran them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterator, Optional

from .errors import AdvisorError
from .job import Analysis, Job, Result, RunFailure, label, run_job
from .locate import RemoteRun, find_units

ENGINES = ("process", "ray")
DEFAULT_JOB = Job()      # frozen: one instance serves every call that passes none


def default_jobs() -> int:
    """The cores this process may run on (the default of --jobs)."""
    import os

    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:      # macOS, Windows
        return os.cpu_count() or 1


def iter_results(path: str | Path, job: Job = DEFAULT_JOB, *, jobs: int = 1, engine: str = "process",
                 ray_address: Optional[str] = None, progress: Callable[[str], None] = lambda msg: None,
                 notice: Optional[Callable[[str], None]] = None) -> Iterator[Result]:
    """Every run under `path`, analyzed `jobs` at a time, yielded in the order of their paths as soon
    as each and all before it are done: an Analysis (or its result document, with job.documents), or
    a RunFailure.

    engine "process": one worker process per job on this machine (jobs=1: in this process);
    "ray": one Ray task per host file, on the cluster at ray_address or a local Ray started for the call
    (where a local Ray would be slower, the process engine runs instead and `notice` says why).
    A path that holds no run at all, or one run that cannot be read, is an error (AdvisorError).
    """
    if engine not in ENGINES:
        raise AdvisorError(f"unknown engine {engine!r}; valid engines: {', '.join(ENGINES)}")
    if jobs < 1:
        raise AdvisorError(f"jobs must be at least 1, not {jobs}")
    notice = notice or progress
    units = find_units(path)
    if any(isinstance(u, RemoteRun) and u.process_local for u in units):
        jobs, engine = 1, "process"     # memory:// exists in this process only
    if engine == "ray" and not ray_address:
        from .ray_engine import local_ray_plan

        jobs, why = local_ray_plan(units, jobs)
        if why:
            notice(why)
            engine = "process"
    if engine == "ray":
        from .ray_engine import ray_results

        results = ray_results(units, job, jobs, ray_address, progress)
    elif jobs == 1 or len(units) == 1 or not _spawnable():
        results = _local_results(units, job, progress)
    else:
        results = _pool_results(units, job, min(jobs, len(units)), progress)
    for _, out in _in_order(results):
        if len(units) == 1 and len(out) == 1 and isinstance(out[0], RunFailure):
            raise AdvisorError(out[0].reason)
        yield from out


def _spawnable() -> bool:
    """Whether spawned workers can start: they import the main module again from its file, which
    a program read from stdin (`python - < script.py`) does not have."""
    import os
    import sys

    main_file = getattr(sys.modules.get("__main__"), "__file__", None)
    return main_file is None or os.path.exists(main_file)


def _in_order(results: Iterator[tuple[int, list[Result]]]) -> Iterator[tuple[int, list[Result]]]:
    """(index, results) pairs arriving in any order, given back in index order as soon as possible."""
    waiting: dict[int, list[Result]] = {}
    following = 0
    for i, out in results:
        waiting[i] = out
        while following in waiting:
            yield following, waiting.pop(following)
            following += 1


def _local_results(units, job: Job, progress) -> Iterator[tuple[int, list[Result]]]:
    for i, unit in enumerate(units):
        progress(f"reading {label(unit)} ({i + 1}/{len(units)})")
        yield i, run_job(unit, job, progress)


_DIED = ("the process analyzing it died (a crash in a native library, or out of memory); "
         "analyze this run alone to see the error")


def _pool_results(units, job: Job, workers: int, progress) -> Iterator[tuple[int, list[Result]]]:
    """Worker processes started by spawn (a fork of a process that imported JAX can deadlock)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from concurrent.futures.process import BrokenProcessPool

    from .child_python import safe_path
    from .cleanup import install_signal_handlers

    progress(f"analyzing {len(units)} runs in {workers} processes")
    died = []
    # The workers (and multiprocessing's resource tracker) start as `python -c` in this folder: under
    # safe_path it stays off their sys.path. A worker stopped by SIGTERM removes its temporary folders.
    with safe_path():
        pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                                   initializer=install_signal_handlers)
    try:
        with safe_path():
            futures = {pool.submit(run_job, unit, job): i for i, unit in enumerate(units)}
        for done, future in enumerate(as_completed(futures), 1):
            i = futures[future]
            try:
                out = future.result()
            except BrokenProcessPool:
                died.append(i)
                continue
            progress(f"analyzed {label(units[i])} ({done}/{len(units)})")
            yield i, out
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    # A dead worker breaks the whole pool: each run it left undone gets a process of its own.
    for i in sorted(died):
        with safe_path():
            alone = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"))
        with alone:
            try:
                with safe_path():
                    pending = alone.submit(run_job, units[i], job)
                out = pending.result()
            except BrokenProcessPool:
                out = [RunFailure(label(units[i]), f"{label(units[i])}: {_DIED}")]
        yield i, out


def analyze_all(path: str | Path, job: Job = DEFAULT_JOB, **how) -> tuple[list, list[RunFailure]]:
    """Every run under `path`: the ones that could be read (Analysis, or result documents with
    job.documents), and the ones that could not (with why). `how`: iter_results' engine, jobs,
    ray_address, progress; the results are the same whichever runs them.

    A path that holds no run at all is an error (AdvisorError); one unreadable run among many is not.
    """
    out, failed = [], []
    for result in iter_results(path, job, **how):
        (failed if isinstance(result, RunFailure) else out).append(result)
    return out, failed


def analyze_path(path: str | Path, job: Job = DEFAULT_JOB, **how) -> list[Analysis]:
    """Every run under `path`; any run that cannot be read is an error (for commands that need all)."""
    out, failed = analyze_all(path, job, **how)
    if failed:
        raise AdvisorError(failed[0].reason)
    return out
