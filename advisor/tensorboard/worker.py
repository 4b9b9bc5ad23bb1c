"""The worker: one analysis (or one comparison) in a child process, so that TensorBoard's request
threads never read a trace; started by jobs.py as `python -m advisor.tensorboard.worker KIND KEY ARGS...`
with the working folder off its sys.path (advisor/child_python.py).

It prints one JSON line per stage ({"stage": ...}) for the progress shown in the tab, writes the
result into the cache, and exits (its memory goes with it: the streaming reader's bounds hold). A
result is kept only if the run's files are as they were when the page asked for it (cache.stamp_of),
before and after the read. Stopped by SIGTERM, SIGINT or SIGHUP (its budget, TensorBoard or `serve`
ending), it removes its temporary folders and xprof's child on the way out.
"""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path
from typing import Optional

STOP_SIGNALS = ("SIGTERM", "SIGINT", "SIGHUP")
_stopped = 0        # the signal that stopped the worker, once one has


class FilesChanged(Exception):
    pass


def _say(**msg) -> None:
    print(json.dumps(msg), flush=True)


def _job(settings: str):
    """The Job of the project's rules and options, as the tab read them (app.project_settings: {} where
    they could not be read)."""
    from ..user_input import RuleConfig, job

    s = json.loads(settings)       # select None: every rule; []: none
    return job(project=RuleConfig(s.get("select"), s.get("ignore") or [], s.get("options") or {}), documents=True)


def _unchanged(files, key: str, settings: str) -> None:
    from . import cache

    try:
        now = cache.run_key(files, settings)
    except OSError:
        now = None
    if now != key:
        raise FilesChanged("the run's files changed while they were read (written, cut short, replaced or "
                           "restored): nothing was kept; reload to analyze them as they are now")


def analyze(key: str, run_dir: str, settings: str = "{}") -> dict:
    from ..compare import metrics
    from ..job import RunFailure, run_job
    from ..report.html import figures
    from ..units import mib
    from .runs import read_run

    run = read_run(Path(run_dir), Path(run_dir).name)
    if run is None:
        raise FilesChanged("the run's traces are gone from its folder")
    files = run.files()
    _unchanged(files, key, settings)
    hosts = len(run.hosts)
    _say(stage=f"reading the trace ({mib(run.size)}, {hosts} host{'s' if hosts > 1 else ''})")
    result = run_job(files, _job(settings))[0]
    if isinstance(result, RunFailure):        # the run could not be read
        doc, brief = {"failed": result.to_json()}, {"failed": True}
    else:
        _say(stage="drawing the charts")
        run_doc = result["run"]
        doc = {"run": json.loads(json.dumps(run_doc, default=str)), "figures": figures(result),
               "metrics": metrics(result).to_json()}
        brief = {"severities": [f["severity"] for f in run_doc["findings"]], "partial": bool(run_doc["warnings"])}
    _unchanged(files, key, settings)      # a result, or a failure, of files that changed is not theirs
    _keep(key, doc, brief)
    return doc


def _keep(key: str, doc: dict, brief: Optional[dict] = None) -> None:
    """Into the cache, unless the worker was told to stop: the exception _stop raises is lost where
    it lands in a finalizer or a callback, and the worker would go on and keep what was stopped."""
    from . import cache

    if _stopped:
        raise SystemExit(128 + _stopped)
    cache.write(key, doc, brief)


def compare(key: str, base_key: str, new_key: str, base_name: str, new_name: str) -> dict:
    from ..compare import Metrics
    from ..compare import compare as compare_metrics
    from ..report.html import compare_section
    from . import cache

    _say(stage="comparing")
    base, new = cache.read(base_key), cache.read(new_key)
    if not base or not new or "metrics" not in base or "metrics" not in new:
        doc = {"failed": {"reason": "one of the two runs has no analysis to compare"}}
    else:
        c = compare_metrics(Metrics.from_json(base["metrics"]), Metrics.from_json(new["metrics"]),
                            *(_ran(doc) for doc in (base, new)))
        doc = {"compare": c.to_json(), "html": compare_section(f"{base_name} → {new_name}", c)}
    _keep(key, doc)
    return doc


def _ran(doc: dict):
    """What a cached analysis ran (the workload and its settings), for the comparison's labels."""
    from ..run_label import from_summary
    return from_summary(((doc.get("run") or {}).get("summary") or {}).get("run"))


def _stop(signum, frame):
    """Unwind (every `finally` runs: xprof's child stopped, temporary folders removed), and ignore
    the signals that follow (Ctrl-C reaches the whole process group, then TensorBoard or `serve`
    sends SIGTERM): cut short, the cleanup would leave folders behind."""
    global _stopped
    _stopped = signum
    for name in STOP_SIGNALS:
        signal.signal(getattr(signal, name), signal.SIG_IGN)
    raise SystemExit(128 + signum)


def main(argv: list[str]) -> int:
    for name in STOP_SIGNALS:
        signal.signal(getattr(signal, name), _stop)
    kind, *args = argv
    try:
        {"analyze": analyze, "compare": compare}[kind](*args)
    except FilesChanged as err:
        _say(error=str(err))
        return 1
    except Exception as err:  # noqa: BLE001 - told to the tab as one line, never a traceback in the page
        _say(error=f"{type(err).__name__}: {err}")
        return 1
    if _stopped:
        return 128 + _stopped
    _say(stage="done")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
