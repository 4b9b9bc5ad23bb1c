"""What the Advisor tab costs in a real TensorBoard: listing a logdir of many runs, opening a run the
first time (analysis in the worker) and again (from the cache), side by side with the Profile
plugin's own run list and with `advisor analyze --format html` on the same run (the same work: load, rules, charts).

The logdir is made under /tmp from fixtures/transformer_scan: --runs run folders of hard links to
its files (distinct folders and modification times, one trace's bytes on disk), deleted at the end.

    python benchmarks/tensorboard_serving.py [--runs 100] [--repeat 10]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = next((ROOT / "fixtures" / "transformer_scan" / "plugins" / "profile").iterdir())


def make_logdir(root: Path, runs: int) -> list[str]:
    names = []
    for i in range(runs):
        name = f"2026_01_01_00_{i // 60:02d}_{i % 60:02d}"
        run = root / "plugins" / "profile" / name
        run.mkdir(parents=True)
        for f in FIXTURE.iterdir():
            os.link(f, run / f.name)
        names.append(name)
    return names


def get(url: str) -> tuple[float, bytes]:
    t = time.perf_counter()
    body = urllib.request.urlopen(url, timeout=600).read()
    return time.perf_counter() - t, body


def median_ms(url: str, repeat: int) -> float:
    get(url)                                  # warm: first request pays imports
    return statistics.median(get(url)[0] for _ in range(repeat)) * 1000


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=10)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="advisor-tb-bench-"))
    proc = None
    try:
        logdir = tmp / "logdir"
        names = make_logdir(logdir, args.runs)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        env = dict(os.environ, ADVISOR_CACHE_DIR=str(tmp / "cache"), TF_CPP_MIN_LOG_LEVEL="2")
        tb = Path(sys.executable).with_name("tensorboard")
        proc = subprocess.Popen([str(tb), "--logdir", str(logdir), "--port", str(port), "--host", "127.0.0.1"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        base = f"http://127.0.0.1:{port}"
        t0 = time.perf_counter()
        while True:
            try:
                get(base + "/data/plugins_listing")
                break
            except OSError:
                if time.perf_counter() - t0 > 120:
                    raise SystemExit("tensorboard did not start in 120 s") from None
                time.sleep(0.3)
        adv = base + "/data/plugin/advisor"
        listed = json.loads(get(adv + "/runs")[1])
        assert len(listed) == args.runs, len(listed)
        rows = [("list the runs: Advisor tab page (index.html)", median_ms(adv + "/index.html", args.repeat)),
                ("list the runs: Advisor runs (JSON)", median_ms(adv + "/runs", args.repeat)),
                ("list the runs: Profile plugin runs (JSON)", median_ms(base + "/data/plugin/profile/runs",
                                                                        args.repeat))]
        run = urllib.parse.quote(listed[0]["name"])
        t = time.perf_counter()
        get(f"{adv}/index.html?run={run}")
        start = urllib.request.Request(f"{adv}/analyze?run={run}", method="POST")    # what the page's script sends
        state = json.loads(urllib.request.urlopen(start, timeout=600).read())["state"]
        while state not in ("done", "failed"):
            time.sleep(0.1)
            state = json.loads(get(f"{adv}/status?run={run}")[1])["state"]
        first = (time.perf_counter() - t) * 1000
        rows.append(("open a run the first time (worker analysis, until done)", first))
        rows.append(("open it again (from the cache)", median_ms(f"{adv}/index.html?run={run}", args.repeat)))
        t = time.perf_counter()
        subprocess.run([sys.executable, "-m", "advisor.cli", "analyze", str(logdir / "plugins" / "profile" / names[-1]),
                        "--format", "html", "--output", str(tmp / "report.html")], check=True, capture_output=True,
                       env=env)
        cli = (time.perf_counter() - t) * 1000
        rows.append(("`advisor analyze RUN --format html` (a fresh process: the same work)", cli))
        width = max(len(r[0]) for r in rows)
        print(f"{args.runs} runs of {FIXTURE.name} ({sum(f.stat().st_size for f in FIXTURE.iterdir()) / 2**20:.1f} MiB "
              f"each), TensorBoard on 127.0.0.1, median of {args.repeat} requests where repeated")
        for name, ms in rows:
            print(f"{name:<{width}}  {ms:10.1f} ms")
        print(f"Advisor list / Profile list: {rows[1][1] / rows[2][1]:.2f}x; "
              f"first open / advisor analyze: {first / cli:.2f}x")
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=30)
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
