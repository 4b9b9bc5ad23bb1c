"""Where `advisor analyze`'s time goes on one trace: wall and CPU time of its parts.

Runs the whole analysis (analyze_path, in process, imports excluded) --repeat times and prints the
median wall and CPU time of each part, timed by wrapping the functions that do it (nested parts
are inside their parents' figures). The first turn also warms the page cache.

    nice -n 10 python benchmarks/analyze_parts.py FILE [--repeat 5]
"""

from __future__ import annotations

import argparse
import collections
import statistics
import time

import jax.profiler  # noqa: F401 - imported before the turns, as analyze_speed.py's measure does

from advisor import engine, job
from advisor.load import event_decoder, host_lines, loader, xprof_tools

PARTS = [   # (module, function, label): a part named "A: B" is inside A's figure
    (loader, "load_timeline", "timeline (`load_timeline`)"),
    (event_decoder, "decode", "timeline: events decoded from the bytes (`event_decoder.decode`)"),
    (event_decoder, "_frame", "timeline: decode: the event chain (`_frame`)"),
    (event_decoder, "_event_fields", "timeline: decode: ids, offsets, durations (`_event_fields`)"),
    (host_lines, "_places", "timeline: program executions of the CPU ops (`host_lines._places`)"),
    (host_lines, "_read_place", "timeline: executions: stats of each one's first op (`_read_place`)"),
    (xprof_tools.PendingXprof, "finish", "waiting for xprof's converters (their child process)"),
    (loader, "_modules", "HLO of the programs (`loader._modules`)"),
    (loader, "device_totals", "device totals (`device_totals.device_totals`)"),
    (job.Job, "analyze", "rules and views (`Job.analyze`)"),
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("file")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    spent: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0.0])
    for owner, name, label in PARTS:
        setattr(owner, name, _timed(getattr(owner, name), spent, label))
    turns = []
    for _ in range(args.repeat):
        spent.clear()
        wall, cpu = time.perf_counter(), time.process_time()
        engine.analyze_path(args.file)
        turns.append({"whole analysis": (time.perf_counter() - wall, time.process_time() - cpu),
                      **{k: tuple(v) for k, v in spent.items()}})
    print("| part | wall | CPU |\n| --- | --- | --- |")
    for label in ["whole analysis"] + [p[2] for p in PARTS]:
        if label in turns[0]:
            wall = statistics.median(t[label][0] for t in turns)
            cpu = statistics.median(t[label][1] for t in turns)
            print(f"| {label} | {wall:.2f} s | {cpu:.2f} s |")


def _timed(fn, spent: dict, label: str):
    def timed(*args, **kwargs):
        wall, cpu = time.perf_counter(), time.process_time()
        try:
            return fn(*args, **kwargs)
        finally:
            spent[label][0] += time.perf_counter() - wall
            spent[label][1] += time.process_time() - cpu
    return timed


if __name__ == "__main__":
    main()
