"""One run's analysis: the unit of work of every engine (this process, worker processes, Ray tasks:
advisor/engine.py, advisor/ray_engine.py).

The run is loaded into the profile model (advisor/load), the user's settings are bound to it once
(the device memory, the peaks, the mesh, the rules' options the views read), the views are
computed (advisor/views), the rules run, and the result is an `Analysis`, or with `documents` the
run's result document (`Analysis.document`), which every renderer reads.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Callable, Optional, Union

from . import views
from .errors import AdvisorError
from .findings import Finding, sort_key
from .locate import RemoteRun, RunFiles, fetched, find_runs, url_join
from .model import Profile
from .rule import Rule
from .settings import Settings, bind
from .views import summary as summary_view


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

    def document(self) -> dict:
        """The run's result document, what every renderer reads: `run`, what `--format json` prints for
        it; `views`, the figures of its views that the JSON leaves out and the other reports draw (each
        step's time, op time by category, what is live at the memory peak, each op's time per step
        under a key that matches it in another run's program)."""
        p = self.profile
        return {"run": self.to_json(), "views": {views.name(v): v.of(p).to_json() for v in views.IN_DOCUMENT}}

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


Result = Union[Analysis, dict, RunFailure]


@dataclasses.dataclass(frozen=True)
class Job:
    """What every run's analysis needs besides the run: the rules, their options and the user's settings,
    picklable (sent to worker processes and Ray tasks), bound to each run once. User input becomes a
    Job in one place: advisor/user_input.py."""
    rules: Optional[tuple[Rule, ...]] = None     # None: every rule
    options: Optional[dict[str, dict]] = None    # {rule id: {option: value}}
    settings: Settings = dataclasses.field(default_factory=Settings)   # the steps window, device memory, peaks, mesh
    compile_check: bool = False     # compile each recommended config change of a bundled workload's run first
    documents: bool = False     # give each run's result document (small) rather than its Analysis (the whole profile)

    def analyze(self, profile: Profile, progress: Callable[[str], None] = lambda msg: None) -> Analysis:
        """The rules on a loaded run, with these settings; their advice checked by compiling it, with
        compile_check (advisor/compiled_advice.py)."""
        from advisor import rules as catalog

        options = self.options or {}
        self.bind(profile, catalog.ALL)
        _views(profile)
        rules = list(catalog.ALL) if self.rules is None else list(self.rules)
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
        for rule in rules:      # what a rule that could not run asks of the user, said once every rule ran
            for note in rule.notes_unmet(profile) if profile.backend in rule.backends else ():
                if note not in profile.notes:
                    profile.notes.append(note)
        from .sources import shorten
        shorten(findings, profile.run_metadata)
        analysis = Analysis(profile=profile, findings=findings, summary=summary_view.of(profile).to_json(),
                            rules=coverage)
        from .compiled_advice import apply_recorded, compile_check_trace
        if self.compile_check:
            compile_check_trace(analysis, progress)
        else:       # what run-workload compiled when it recorded the run, as it said then
            apply_recorded(analysis)
        return analysis

    def bind(self, profile: Profile, rules: list[Rule]) -> None:
        """The settings bound to the run once, before any view is computed (advisor/settings.py): the
        user's, with advisor calibrate's figures for the machine the run records where no peaks are
        given, and the options of `rules` that views read too (Rule.binds)."""
        import socket

        from .calibrate import for_trace

        given = self.settings
        if given.device_memory:
            profile.notes.append(f"device memory capacity {given.device_memory:,} bytes, as given on the command line")
        calibration, unused = None, ""
        if not given.peaks and profile.hosts:
            calibration, unused = for_trace(profile.backend, profile.hosts[0].name, profile.run_metadata)
        options = {name: value for rule in rules for name in rule.binds
                   if (value := (self.options or {}).get(rule.id, {}).get(name)) is not None}
        bind(profile, dataclasses.replace(given, calibration=calibration, calibration_unused=unused,
                                          this_host=socket.gethostname(), **options))

    def readers(self) -> dict[str, list[str]]:
        """{a part of the trace: the ids of the chosen rules that read it}, for the loader to name."""
        from advisor import rules as catalog

        from .rule import readers

        return readers(catalog.ALL if self.rules is None else self.rules)

    def result(self, analysis: Analysis) -> Union[Analysis, dict]:
        return analysis.document() if self.documents else analysis


def _views(profile: Profile) -> None:
    """Every view (views.ALL), in dependency order, before the rules: their notes go to the run's
    notes in that order. A view that breaks is None, with a note (its readers then break too)."""
    for view in views.ALL:
        try:
            computed = view.of(profile)
        except Exception as err:  # noqa: BLE001 - a broken view must not stop the analysis
            profile.views[views.name(view)] = None
            profile.notes.append(f"internal error in the {views.name(view)} view: {type(err).__name__}: {err} "
                                 "(please report it; the rules ran without it)")
            continue
        profile.notes.extend(computed.notes if computed is not None else ())


def run_job(unit, job: Job, progress: Callable[[str], None] = lambda msg: None) -> list[Result]:
    """Analyze one unit that locate found (a local run, or a run folder under a URL, fetched to a
    private temporary folder and removed after): the unit of work of every engine."""
    if isinstance(unit, RemoteRun):
        try:
            with fetched(unit) as local:
                results = [_relabel(_one(run, job, progress), str(local), unit.url) for run in find_runs(local)]
        except AdvisorError as err:
            results = [RunFailure(unit.url, str(err))]
    else:
        results = [_one(unit, job, progress)]
    return [job.result(r) if isinstance(r, Analysis) else r for r in results]


def _one(run: RunFiles, job: Job, progress) -> Union[Analysis, RunFailure]:
    from .load import loader
    from .trace_head import check_trace_head

    try:
        check_trace_head(run.xplane)     # before any reader starts on it (another host's file: skipped, a warning)
        return job.analyze(loader.load_run(run, job.settings.steps, job.readers()), progress)
    except AdvisorError as err:
        return RunFailure(str(run.xplane), str(err))


def _relabel(result: Union[Analysis, RunFailure], local: str, url: str) -> Union[Analysis, RunFailure]:
    """Name a fetched run by its URL, never by the temporary folder it was read from."""
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


def label(unit) -> str:
    """How progress lines and failures name a unit of work."""
    return str(unit.xplane) if isinstance(unit, RunFiles) else str(unit)
