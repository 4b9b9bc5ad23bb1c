"""Locate runs, load each, run the rules: the pipeline behind every command (summaries: advisor/views).

The unit of work is one run (`run_job`): it reads the run (fetching it first when it is under a URL),
reduces it to the profile model and runs the rules, in this process, in worker processes
(`--jobs`) or as Ray tasks (`--engine ray`, a task per host file: see ray_engine); results come back
in the order of the runs' paths.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Optional, Union

from .errors import AdvisorError
from .findings import Finding, sort_key
from .locate import RemoteRun, RunFiles, fetched, find_runs, find_units
from .model import Profile
from .rule import Rule
from .peaks import UserPeaks
from .views.efficiency import efficiency
from .views.summary import summarize


@dataclasses.dataclass
class Analysis:
    profile: Profile
    findings: list[Finding]
    summary: dict[str, Any]
    # which rules ran, which could not (and what the trace lacks), which are for other backends
    rules: dict[str, Any] = dataclasses.field(default_factory=dict)

    def to_json(self) -> dict:
        p = self.profile
        return {
            "path": p.path,
            "backend": p.backend,
            "device": p.device_name,
            "hosts": [{"name": h.name, "path": h.path, "steps": len(h.steps),
                       "devices": [d.name for d in h.devices]} for h in p.hosts],
            "summary": self.summary,
            "findings": [f.to_json() for f in self.findings],
            "notes": p.notes,
            "warnings": [f"{p.path}: {w}" for w in p.warnings],
            "rules": self.rules,
        }

    @property
    def partial(self) -> bool:
        """Part of the trace could not be read: the findings may be incomplete."""
        return bool(self.profile.warnings)


@dataclasses.dataclass
class RunFailure:
    """A run that could not be analyzed at all, and why (one line for the user)."""
    path: str
    reason: str

    def to_json(self) -> dict:
        return {"path": self.path, "reason": self.reason}


def all_rules() -> list[Rule]:
    from advisor.rules import ALL
    return list(ALL)


def select_rules(select: Optional[Iterable[str]] = None, ignore: Iterable[str] = ()) -> list[Rule]:
    """select: None for every rule; an empty list (`--select none`) for no rule."""
    rules = {r.id: r for r in all_rules()}
    select = None if select is None else list(select)
    for rid in [*(select or ()), *ignore]:
        if rid not in rules:
            raise AdvisorError(f"unknown rule id {rid!r}; valid ids: {', '.join(rules)} (see `advisor rules`)")
    chosen = [r for r in rules.values() if select is None or r.id in select]
    return [r for r in chosen if r.id not in set(ignore)]


ENGINES = ("process", "ray")


def default_jobs() -> int:
    """The cores this process may run on (the default of --jobs)."""
    import os

    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:      # macOS, Windows
        return os.cpu_count() or 1


@dataclasses.dataclass(frozen=True)
class Job:
    """What every run's analysis needs besides the run: picklable, sent to worker processes and Ray tasks."""
    rules: Optional[tuple[Rule, ...]] = None
    options: Optional[dict[str, dict]] = None
    device_memory: Optional[int] = None
    as_json: bool = False       # return Analysis.to_json() (small) instead of the Analysis (the whole profile)
    steps: Optional[slice] = None   # analyze only the steps numbered in this slice (--steps A:B)
    peaks: Optional[UserPeaks] = None   # --peak-flops/--peak-bandwidth or advisor calibrate's
    mesh: Optional[tuple] = None    # the mesh's axes, ((name, size), ...), given with --mesh

    def analyze(self, profile: Profile) -> Analysis:
        return analyze_profile(profile, None if self.rules is None else list(self.rules), self.options,
                               self.device_memory, self.peaks, mesh=self.mesh)


Result = Union[Analysis, dict, RunFailure]


def run_job(unit, job: Job) -> list[Result]:
    """Analyze one unit that locate found (a local run, or a run folder under a URL, fetched to a
    private temporary folder and removed after): the unit of work of every engine."""
    if isinstance(unit, RemoteRun):
        try:
            with fetched(unit) as local:
                results = [_relabel(_one(run, job), str(local), unit.url) for run in find_runs(local)]
        except AdvisorError as err:
            results = [RunFailure(unit.url, str(err))]
    else:
        results = [_one(unit, job)]
    return [r.to_json() if job.as_json and isinstance(r, Analysis) else r for r in results]


def _one(run: RunFiles, job: Job) -> Union[Analysis, RunFailure]:
    from .load.loader import load_run
    from .trace_head import check_trace_head

    try:
        check_trace_head(run.xplane)     # before any reader starts on it (another host's file is skipped with a warning)
        return job.analyze(load_run(run, job.steps))
    except AdvisorError as err:
        return RunFailure(str(run.xplane), str(err))


def _relabel(result: Union[Analysis, RunFailure], local: str, url: str) -> Union[Analysis, RunFailure]:
    """Name a fetched run by its URL, never by the temporary folder it was read from."""
    import re

    from .locate import url_join

    def swap(text: str) -> str:
        if "::" not in url:
            return text.replace(local, url)
        # a chained URL (tar://a::file:///x.tar): the file's name goes into its first link
        return re.sub(re.escape(local) + r"(/[^\s;,)]*)?", lambda m: url_join(url, m.group(1) or ""), text)

    if isinstance(result, RunFailure):
        return RunFailure(swap(result.path), swap(result.reason))
    p = result.profile
    p.path = swap(p.path)
    for host in p.hosts:
        host.path = swap(host.path)
    p.notes[:] = [swap(n) for n in p.notes]
    p.warnings[:] = [swap(w) for w in p.warnings]
    return result


def iter_analyses(path: str | Path, rules: Optional[list[Rule]] = None,
                  options: Optional[dict[str, dict]] = None,
                  progress: Callable[[str], None] = lambda msg: None,
                  device_memory: Optional[int] = None, *, jobs: int = 1, engine: str = "process",
                  ray_address: Optional[str] = None, as_json: bool = False,
                  steps: Optional[slice] = None, notice: Optional[Callable[[str], None]] = None,
                  peaks: Optional[UserPeaks] = None, mesh=None) -> Iterator[Result]:
    """Every run under `path`, analyzed `jobs` at a time, yielded in the order of their paths as soon
    as each and all before it are done: an Analysis (or its JSON with as_json), or a RunFailure.

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
    job = Job(None if rules is None else tuple(rules), options, device_memory, as_json, steps, peaks,
              tuple(map(tuple, mesh)) if mesh else None)
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
    for i, out in _in_order(results):
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
        progress(f"reading {_label(unit)} ({i + 1}/{len(units)})")
        yield i, run_job(unit, job)


def _label(unit) -> str:
    return str(unit.xplane) if isinstance(unit, RunFiles) else str(unit)


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
            progress(f"analyzed {_label(units[i])} ({done}/{len(units)})")
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
                out = [RunFailure(_label(units[i]), f"{_label(units[i])}: {_DIED}")]
        yield i, out


def analyze_all(path: str | Path, rules: Optional[list[Rule]] = None,
                options: Optional[dict[str, dict]] = None,
                progress: Callable[[str], None] = lambda msg: None,
                device_memory: Optional[int] = None, *, jobs: int = 1, engine: str = "process",
                ray_address: Optional[str] = None, steps: Optional[slice] = None,
                peaks: Optional[UserPeaks] = None, mesh=None) -> tuple[list[Analysis], list[RunFailure]]:
    """Every run under `path`: the ones that could be read, and the ones that could not (with why).

    A path that holds no run at all is an error (AdvisorError); one unreadable run among many is not.
    jobs/engine/ray_address: see iter_analyses; the results are the same whichever runs them.
    steps: only the steps numbered in this slice; peaks: the device peaks to measure efficiency against.
    """
    out, failed = [], []
    for result in iter_analyses(path, rules, options, progress, device_memory, jobs=jobs, engine=engine,
                                ray_address=ray_address, steps=steps, peaks=peaks, mesh=mesh):
        (failed if isinstance(result, RunFailure) else out).append(result)
    return out, failed


def analyze_path(path: str | Path, rules: Optional[list[Rule]] = None,
                 options: Optional[dict[str, dict]] = None,
                 progress: Callable[[str], None] = lambda msg: None,
                 device_memory: Optional[int] = None, peaks: Optional[UserPeaks] = None) -> list[Analysis]:
    """Every run under `path`; any run that cannot be read is an error (for commands that need all)."""
    out, failed = analyze_all(path, rules, options, progress, device_memory, peaks=peaks)
    if failed:
        raise AdvisorError(failed[0].reason)
    return out


def analyze_run(run: RunFiles, rules: Optional[list[Rule]] = None,
                options: Optional[dict[str, dict]] = None, device_memory: Optional[int] = None,
                steps: Optional[slice] = None, peaks: Optional[UserPeaks] = None) -> Analysis:
    from .load.loader import load_run

    return analyze_profile(load_run(run, steps), rules, options, device_memory, peaks)


def _views(profile: Profile, mesh=None, options: Optional[dict] = None) -> None:
    """The derived views the rules read, computed once before them (mesh: the axes given with --mesh;
    options: the rules' options, host-bound's threshold for the idle view)."""
    from .views import idle, parallelism

    idle.of(profile, ((options or {}).get("host-bound") or {}).get("min_idle_share"))
    try:
        parallelism.of(profile, mesh)
    except Exception as err:  # noqa: BLE001 - a broken view must not stop the analysis
        profile.views["parallelism"] = None
        profile.notes.append(f"internal error in the parallelism view: {type(err).__name__}: {err} "
                             "(please report it; the rules ran without it)")


def analyze_profile(profile: Profile, rules: Optional[list[Rule]] = None,
                    options: Optional[dict[str, dict]] = None, device_memory: Optional[int] = None,
                    peaks: Optional[UserPeaks] = None, mesh=None) -> Analysis:
    """The rules on a loaded run; device_memory (bytes) stands for the capacity the trace does not record;
    peaks (FLOP/s, bytes/s) for the device peaks the efficiency view measures against; mesh the axes
    given with --mesh."""
    if device_memory:
        profile.device_capacity_bytes = device_memory
        profile.notes.append(f"device memory capacity {device_memory:,} bytes, as given on the command line")
    options = options or {}
    _views(profile, mesh, options)
    rules = all_rules() if rules is None else rules
    findings = []
    coverage: dict[str, Any] = {"ran": [], "could_not_run": [], "other_backends": []}
    for rule in rules:
        if profile.backend not in rule.backends:
            coverage["other_backends"].append(rule.id)
            continue
        lacks = rule.missing(profile)
        try:
            found = rule.run(profile, options.get(rule.id))
        except Exception as err:  # noqa: BLE001 - one broken rule must not hide the others' findings
            found = []
            profile.notes.append(f"internal error in rule {rule.id}: {type(err).__name__}: {err} "
                                 "(please report it; the other rules ran)")
        findings.extend(found)
        if lacks and not found:     # run all the same: a rule's needs never hide a finding
            coverage["could_not_run"].append({"rule": rule.id, "why": "; ".join(lacks)})
        else:
            coverage["ran"].append(rule.id)
    findings.sort(key=sort_key)
    if profile.device_capacity_bytes is None and any(r.id == "unneeded-grad-accumulation" for r in rules):
        note = ("device memory capacity unknown (the trace does not record it): unneeded-grad-accumulation "
                "was skipped; pass --device-memory to check it")
        if note not in profile.notes:
            profile.notes.append(note)
    summary = summarize(profile)
    summary["efficiency"] = efficiency(profile, peaks)
    from .sources import shorten
    shorten(findings, summary, profile.run_metadata)
    return Analysis(profile=profile, findings=findings, summary=summary, rules=coverage)
