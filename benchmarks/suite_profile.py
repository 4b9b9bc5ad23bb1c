"""Where the test suite's time goes: the suite run as the README says (`pytest`, or `pytest --slow`
with --slow), with the CPU seconds of every test and module (the worker's own and its children's:
the workloads, xprof's converters and Ray processes a test starts), and when each worker ran what.

    python benchmarks/suite_profile.py [--slow] [--top 25] [pytest args ...]

Wall time on a shared 2-core VM moves by a minute between runs of one tree; CPU seconds move less
(about 15%), and say which modules to make cheaper. The last modules of each worker show whether
one worker idles at the end (the order is tests/conftest.py's FIRST).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

PLUGIN = '''
import json, os, resource, time
import pytest

_cpu_by = {}
_spans = []


def _cpu():
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, kids.ru_utime + kids.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    own0, kids0 = _cpu()
    t0 = time.time()
    yield
    own1, kids1 = _cpu()
    _cpu_by[item.nodeid] = [own1 - own0, kids1 - kids0]
    _spans.append([item.nodeid.split("::")[0], t0, time.time()])


def pytest_sessionfinish(session):
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    out = os.path.join(os.environ["SUITE_PROFILE_DIR"], worker + ".json")
    with open(out, "w") as f:
        json.dump({"cpu": _cpu_by, "spans": _spans}, f)
'''


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--slow", action="store_true", help="run the slow tests too, as .ci/run does")
    ap.add_argument("--top", type=int, default=25, help="modules and tests listed")
    args, rest = ap.parse_known_args()
    with tempfile.TemporaryDirectory(prefix="suite-profile-") as tmp:
        Path(tmp, "suite_profile_plugin.py").write_text(PLUGIN)
        env = {**os.environ, "SUITE_PROFILE_DIR": tmp,
               "PYTHONPATH": os.pathsep.join([tmp, os.environ.get("PYTHONPATH", "")])}
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "suite_profile_plugin", "-p", "no:cacheprovider",
               *(["--slow"] if args.slow else []), *rest]
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        tail = [line for line in proc.stdout.splitlines() if line.strip()][-1:]
        docs = {p.stem: json.loads(p.read_text()) for p in Path(tmp).glob("*.json")}
        docs = {worker: doc for worker, doc in docs.items() if doc["spans"]}    # xdist's controller runs none
    if not docs:
        print(proc.stdout[-3000:] + proc.stderr[-3000:], file=sys.stderr)
        return 1
    print(f"{' '.join(cmd[2:])}: {wall:.0f} s wall, exit {proc.returncode}; {tail[0] if tail else ''}")
    for line in proc.stdout.splitlines():
        if line.startswith(("FAILED", "ERROR")):
            print(line)
    modules: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0.0])
    tests = []
    start = min(s[1] for d in docs.values() for s in d["spans"])
    for worker, doc in sorted(docs.items()):
        for nodeid, (own, kids) in doc["cpu"].items():
            module = modules[nodeid.split("::")[0]]
            module[0] += own
            module[1] += kids
            tests.append((own + kids, nodeid))
        total = sum(own + kids for own, kids in doc["cpu"].values())
        order = []
        for module_name, t0, t1 in doc["spans"]:
            if order and order[-1][0] == module_name:
                order[-1][2] = t1
            else:
                order.append([module_name, t0, t1])
        last = ", ".join(f"{Path(m).stem} {a - start:.0f}-{b - start:.0f} s" for m, a, b in order[-4:])
        print(f"{worker}: {total:.0f} CPU s, done at {order[-1][2] - start:.0f} s; last: {last}")
    print(f"all: {sum(own + kids for own, kids in modules.values()):.0f} CPU s")
    print(f"\n{'CPU s':>7} {'own':>7} {'children':>8}  module")
    for name, (own, kids) in sorted(modules.items(), key=lambda kv: -sum(kv[1]))[:args.top]:
        print(f"{own + kids:7.1f} {own:7.1f} {kids:8.1f}  {name}")
    print(f"\n{'CPU s':>7}  test")
    for cpu, nodeid in sorted(tests, reverse=True)[:args.top]:
        print(f"{cpu:7.1f}  {nodeid}")
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
