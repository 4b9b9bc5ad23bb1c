"""`advisor serve` under load: many open pages on a logdir of many runs, this tree's server against
the code before (--baseline REV), side by side in one run.

Each client is a browser tab: it loads the run list (index.html), opens a run's report
(index.html?run=R, analyzed beforehand), then polls that run's status every second, as an open page
does, and starts over every --cycle seconds, on a keep-alive connection (a new one when the server
closes it). Every request's time is measured from sending it to its last byte; a request that gets no
answer (refused, reset, closed, nothing within 60 s) is dropped. Printed per server: requests, drops,
and the median, 95th percentile and maximum of each kind, then their ratios.

The logdir is made under /tmp from fixtures/transformer_scan: --runs run folders of hard links to
its files; each server gets its own cache folder and analyzes the report's run before the load
starts. The baseline is `git archive REV` of this repository, with rules/ and workloads/ moved to
where they are installed (advisor/rules, advisor/workloads), imported through PYTHONPATH.

    flock /tmp/advisor-heavy.lock python benchmarks/serve_load.py --baseline 8ca9936 [--runs 2000] [--clients 200]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = next((ROOT / "fixtures" / "transformer_scan" / "plugins" / "profile").iterdir())
TIMEOUT_S = 60.0


def make_logdir(root: Path, runs: int) -> list[str]:
    names = []
    for i in range(runs):
        name = f"2026_01_01_{i // 3600:02d}_{i // 60 % 60:02d}_{i % 60:02d}"
        run = root / "plugins" / "profile" / name
        run.mkdir(parents=True)
        for f in FIXTURE.iterdir():
            os.link(f, run / f.name)
        names.append(name)
    return names


def baseline_tree(rev: str, dest: Path) -> Path:
    """The repository at `rev`, laid out as it is installed (advisor.rules, advisor.workloads)."""
    dest.mkdir()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "advisor", "rules", "workloads"], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    for name in ("rules", "workloads"):
        (dest / name).rename(dest / "advisor" / name)
    return dest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Side:
    """One server: `python -m advisor serve` in a neutral folder, from `tree` (None: this tree as installed)."""

    def __init__(self, label: str, tree: Path | None, logdir: Path, work: Path):
        self.label, self.port = label, free_port()
        env = dict(os.environ, ADVISOR_CACHE_DIR=str(work / f"cache-{label}"), TF_CPP_MIN_LOG_LEVEL="2")
        if tree is not None:
            env["PYTHONPATH"] = str(tree)
        cwd = work / f"cwd-{label}"
        cwd.mkdir()
        self.proc = subprocess.Popen([sys.executable, "-m", "advisor", "serve", str(logdir), "--port", str(self.port)],
                                     cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        line = self.proc.stderr.readline()
        if "serving" not in line:
            raise SystemExit(f"{label}: serve did not start: {line}{self.proc.stderr.read()}")
        self.base = f"http://127.0.0.1:{self.port}"

    def analyze(self, name: str) -> None:
        """The run analyzed before the load (the old server starts it on a GET of status, the new on a POST)."""
        def ask(method: str) -> dict:
            req = urllib.request.Request(f"{self.base}/{'status' if method == 'GET' else 'analyze'}?run={name}",
                                         method=method)
            try:
                return json.loads(urllib.request.urlopen(req, timeout=600).read())
            except urllib.error.HTTPError as err:
                return {"state": "missing" if err.code in (404, 405) else f"http {err.code}"}
        st = ask("POST")
        end = time.monotonic() + 600
        while st.get("state") != "done":
            if st.get("state") == "failed" or time.monotonic() > end:
                raise SystemExit(f"{self.label}: the analysis of {name} failed: {st}")
            time.sleep(0.3)
            st = ask("GET")
            if st.get("state") == "none":
                st = ask("POST")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


async def _get(conn: dict, port: int, path: str) -> int:
    """One GET on the client's connection (opened again when needed); the body's length."""
    if conn.get("w") is None:
        conn["r"], conn["w"] = await asyncio.open_connection("127.0.0.1", port)
    r, w = conn["r"], conn["w"]
    w.write(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
    await w.drain()
    status = await r.readline()
    if not status.startswith(b"HTTP/1.1 200"):
        raise ConnectionError(f"status {status[:40]!r}")
    length, close = None, False
    while (line := await r.readline()) not in (b"\r\n", b""):
        key, _, value = line.decode("latin-1").partition(":")
        if key.strip().lower() == "content-length":
            length = int(value)
        elif key.strip().lower() == "connection" and value.strip().lower() == "close":
            close = True
    body = await (r.readexactly(length) if length is not None else r.read())
    if close or length is None:
        w.close()
        conn["w"] = None
    return len(body)


async def _client(port: int, report: str, until: float, cycle: float, ramp: float, out: list,
                  rng: random.Random) -> None:
    conn: dict = {}
    await asyncio.sleep(rng.uniform(0, ramp))
    while time.monotonic() < until:
        start = time.monotonic()
        plan = [("list", "/index.html"), ("report", f"/index.html?run={report}")]
        plan += [("status", f"/status?run={report}")] * int(cycle)
        for i, (kind, path) in enumerate(plan):
            if kind == "status":
                await asyncio.sleep(max(0.0, start + i - 1 - time.monotonic()))   # once a second
            if time.monotonic() >= until:
                break
            t = time.monotonic()
            try:
                await asyncio.wait_for(_get(conn, port, path), TIMEOUT_S)
                out.append((kind, time.monotonic() - t, True))
            except (OSError, ConnectionError, asyncio.TimeoutError, asyncio.IncompleteReadError) as err:
                out.append((kind, time.monotonic() - t, False))
                if conn.get("w") is not None:
                    conn["w"].close()
                conn["w"] = None
                del err


async def _load(port: int, report: str, clients: int, seconds: float, cycle: float, ramp: float, seed: int) -> list:
    out: list = []
    rng = random.Random(seed)
    until = time.monotonic() + seconds
    await asyncio.gather(*(_client(port, report, until, cycle, ramp, out, random.Random(rng.random()))
                           for _ in range(clients)))
    return out


def _stats(rows: list, kind: str | None) -> dict:
    times = sorted(t * 1000 for k, t, ok in rows if ok and (kind is None or k == kind))
    drops = sum(1 for k, _, ok in rows if not ok and (kind is None or k == kind))
    if not times:
        return {"n": 0, "drops": drops}
    return {"n": len(times), "drops": drops, "p50": statistics.median(times),
            "p95": times[min(len(times) - 1, int(0.95 * len(times)))], "max": times[-1]}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=2000)
    ap.add_argument("--clients", type=int, default=200)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--cycle", type=float, default=10.0, help="seconds a tab polls before it loads its pages again")
    ap.add_argument("--ramp", type=float, default=1.0,
                    help="seconds over which the clients open their first page (1: a stampede, every tab at once "
                         "and again every --cycle; --cycle: tabs opened at random times, a steady load)")
    ap.add_argument("--baseline", metavar="REV", help="also measure the server at this commit (e.g. 8ca9936)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="advisor-serve-bench-"))
    results = {}
    try:
        logdir = work / "logdir"
        names = make_logdir(logdir, args.runs)
        report = names[len(names) // 2]
        sides = [("this tree", None)]
        if args.baseline:
            sides.insert(0, (f"baseline {args.baseline}", baseline_tree(args.baseline, work / "baseline")))
        for label, tree in sides:
            side = Side(label.split()[0], tree, logdir, work)
            try:
                side.analyze(report)
                urllib.request.urlopen(f"{side.base}/index.html", timeout=600).read()     # warm
                t = time.monotonic()
                rows = asyncio.run(_load(side.port, report, args.clients, args.seconds, args.cycle, args.ramp,
                                         args.seed))
                results[label] = (rows, time.monotonic() - t)
            finally:
                side.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{args.runs} runs, {args.clients} clients for {args.seconds:g} s, starting over {args.ramp:g} s: each "
          f"loads the run list and a report, then polls its status every second, for {args.cycle:g} s at a time; "
          f"times in ms from request to last byte; dropped: no answer (refused, reset, closed, over {TIMEOUT_S:g} s)")
    kinds = (None, "list", "report", "status")
    print(f"{'server':<22} {'request':<8} {'answered':>9} {'dropped':>8} {'p50':>9} {'p95':>9} {'max':>9}")
    summary = {}
    for label, (rows, took) in results.items():
        for kind in kinds:
            s = _stats(rows, kind)
            summary[(label, kind)] = s
            cells = [f"{s[k]:9.1f}" if k in s else f"{'-':>9}" for k in ("p50", "p95", "max")]
            print(f"{label:<22} {kind or 'all':<8} {s['n']:>9,} {s['drops']:>8,} {' '.join(cells)}")
        print(f"{label:<22} {len(rows) / took:.0f} requests/s over {took:.1f} s")
    if len(results) == 2:
        (old, _), (new, _) = results.items()
        for kind in kinds:
            a, b = summary[(old, kind)], summary[(new, kind)]
            if "p95" in a and "p95" in b:
                print(f"{kind or 'all'}: p95 {a['p95']:.1f} -> {b['p95']:.1f} ms ({a['p95'] / b['p95']:.1f}x), "
                      f"dropped {a['drops']:,} -> {b['drops']:,}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
