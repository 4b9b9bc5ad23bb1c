"""A second identical `advisor run-workload` against the first: what the compilation cache saves.

Each round starts from an empty cache folder (XDG_CACHE_HOME in a temporary folder), runs the
command once (every program compiled and written to the cache), then again (every program
loaded), each as a fresh `advisor` process timed from start to exit, the way a user runs it.
Rounds alternate first and second runs, so a neighbour's load falls on both. Prints the medians,
the ratio, and checks that both runs reported the same peak memory and HLO findings.

    nice -n 5 python benchmarks/compile_cache.py [--workload mlp] [--preset tiny] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HLO_RULES = {"scan-dynamic-update-slice", "missing-remat", "missing-buffer-donation", "float32-activations",
             "float32-attention-logits", "unneeded-grad-accumulation", "remat-too-broad"}


def run_once(workload: str, preset: str, folder: Path, tag: str) -> tuple[float, dict]:
    out = folder / f"{tag}.json"
    env = {**os.environ, "XDG_CACHE_HOME": str(folder / "cache")}
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "advisor", "run-workload", workload, "--preset", preset,
                    "--logdir", str(folder / tag), "--format", "json", "--output", str(out)],
                   check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0, json.loads(out.read_text())["runs"][0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", default="mlp")
    parser.add_argument("--preset", default="tiny")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    first, second = [], []
    for r in range(args.repeat):
        with tempfile.TemporaryDirectory(prefix="advisor-cache-bench-") as tmp:
            folder = Path(tmp)
            t1, a = run_once(args.workload, args.preset, folder, "first")
            t2, b = run_once(args.workload, args.preset, folder, "second")
            first.append(t1)
            second.append(t2)
            cache_a, cache_b = a["summary"]["run"]["compile_cache"], b["summary"]["run"]["compile_cache"]
            same_peak = a["summary"].get("peak_memory_bytes") == b["summary"].get("peak_memory_bytes")
            same_hlo = sorted(f["rule"] for f in a["findings"] if f["rule"] in HLO_RULES) == \
                sorted(f["rule"] for f in b["findings"] if f["rule"] in HLO_RULES)
            print(f"round {r + 1}: first {t1:.2f} s (compile {a['summary']['run']['compile_s']:.2f} s, "
                  f"{cache_a['misses']} programs compiled), second {t2:.2f} s (compile "
                  f"{b['summary']['run']['compile_s']:.2f} s, {cache_b['hits']} loaded, "
                  f"{cache_b['misses']} compiled); same peak memory: {same_peak}, same HLO findings: {same_hlo}",
                  flush=True)
    m1, m2 = statistics.median(first), statistics.median(second)
    print(f"\nadvisor run-workload {args.workload} --preset {args.preset}, medians of {args.repeat}: "
          f"first {m1:.2f} s, second {m2:.2f} s: the second is {m1 / m2:.2f}x faster")


if __name__ == "__main__":
    main()
