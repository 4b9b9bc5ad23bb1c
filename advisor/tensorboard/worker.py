"""The worker: one analysis (or one comparison) in a child process, so that TensorBoard's request
threads never read a trace; `python -m advisor.tensorboard.worker KIND KEY ARGS...`.

It prints one JSON line per stage ({"stage": ...}) for the progress shown in the tab, writes the
result into the cache, and exits (its memory goes with it: the streaming reader's bounds hold).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def _say(**msg) -> None:
    print(json.dumps(msg), flush=True)


def _job(settings: str):
    from ..engine import Job, all_rules, select_rules
    from ..settings import validate_options

    s = json.loads(settings)
    if not s:
        return Job()
    rules = select_rules(s.get("select"), s.get("ignore") or ())     # select None: every rule; []: none
    return Job(rules=tuple(rules), options=validate_options(s.get("options") or {}, {r.id: r for r in all_rules()}))


def analyze(key: str, run_dir: str, settings: str = "{}") -> dict:
    from ..compare import metrics
    from ..engine import run_job
    from ..locate import find_runs
    from ..report.html import figures
    from . import cache

    from ..units import mib

    runs = find_runs(Path(run_dir))
    size = sum(p.stat().st_size for p in runs[0].host_files)
    hosts = len(runs[0].host_files)
    _say(stage=f"reading the trace ({mib(size)}, {hosts} host{'s' if hosts > 1 else ''})")
    result = run_job(runs[0], _job(settings))[0]
    if not hasattr(result, "profile"):        # a RunFailure: the run could not be read
        doc, brief = {"failed": result.to_json()}, {"failed": True}
    else:
        _say(stage="drawing the charts")
        run_doc = result.to_json()
        doc = {"run": json.loads(json.dumps(run_doc, default=str)), "figures": figures(run_doc, result),
               "metrics": metrics(result).to_json()}
        brief = {"severities": [f.severity for f in result.findings], "partial": result.partial}
    cache.write(key, doc, brief)
    return doc


def compare(key: str, base_key: str, new_key: str, base_name: str, new_name: str) -> dict:
    from ..compare import Metrics, compare as compare_metrics
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
    cache.write(key, doc)
    return doc


def _ran(doc: dict):
    """What a cached analysis ran (the workload and its settings), for the comparison's labels."""
    from ..run_label import from_summary
    return from_summary(((doc.get("run") or {}).get("summary") or {}).get("run"))


def main(argv: list[str]) -> int:
    kind, *args = argv
    try:
        {"analyze": analyze, "compare": compare}[kind](*args)
    except Exception as err:  # noqa: BLE001 - told to the tab as one line, never a traceback in the page
        _say(error=f"{type(err).__name__}: {err}")
        return 1
    _say(stage="done")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
