"""Fuzz advisor with mutants of real traces: no traceback, crash, hang or silent wrong answer.

Each mutant is a committed fixture's `.xplane.pb` with one mutation (byte flips anywhere,
byte flips inside the metadata plane that holds the HLO, truncation, a zeroed range, a
duplicated chunk), analyzed in process with the engine. Outcomes:

- rejected: one clear line (AdvisorError, exit 2 on the command line);
- same: the report equals the unmutated one's;
- warned: the report says what it could not read (profile.warnings);
- numbers: same findings (rule, severity) and step program, other measured numbers: a flip
  inside a timestamp or size the trace records, which no reader can tell from a real value;
- FINDINGS: other findings and no warning (a silently different answer);
- CRASH: any other exception, a rule's internal error, or a report its format's parser refuses
  (JSON parsed strictly, the text report free of control characters);
- HANG: no answer within the time limit (pool runs only).

    nice -n 10 python benchmarks/fuzz.py [-n 10000] [--workers 2] [--seed 0] [--fixture transformer_scan]

tests/test_fuzz.py runs a few hundred of the same mutants in process.
"""

from __future__ import annotations

import argparse
import collections
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = "transformer_scan"
KINDS = ("flip", "hlo_flip", "truncate", "zero", "duplicate")
BAD = ("FINDINGS", "CRASH", "HANG")
_LAST_WARNINGS: list[str] = []


def fixture_run(name: str = FIXTURE) -> Path:
    """The run folder (the one holding the .xplane.pb) of a committed fixture."""
    return next((ROOT / "fixtures" / name).rglob("*.xplane.pb")).parent


def metadata_range(data: bytes) -> tuple[int, int]:
    """Byte range of the `/host:metadata` plane (it holds the HLO protos) in a serialized XSpace."""
    from advisor.load.xplane import metadata_plane

    found = metadata_plane(data)
    if found is None:
        raise ValueError("no metadata plane")
    return found[1], found[2]


def mutate(data: bytes, rng: random.Random, kind: str, hlo: tuple[int, int]) -> bytes:
    buf = bytearray(data)
    if kind == "flip":
        for _ in range(rng.randint(1, 4)):
            buf[rng.randrange(len(buf))] ^= rng.randint(1, 255)
    elif kind == "hlo_flip":
        buf[rng.randrange(*hlo)] ^= rng.randint(1, 255)
    elif kind == "truncate":
        del buf[rng.randrange(len(buf)):]
    elif kind == "zero":
        start = rng.randrange(len(buf))
        end = min(len(buf), start + rng.randint(1, 4096))
        buf[start:end] = bytes(end - start)
    else:
        start = rng.randrange(len(buf))
        chunk = buf[start:start + rng.randint(1, 4096)]
        at = rng.randrange(len(buf))
        buf[at:at] = chunk
    return bytes(buf)


def mutants(data: bytes, seed: int, n: int):
    """(index, kind, bytes) of n seeded mutants, kinds in turn."""
    hlo = metadata_range(data)
    for i in range(n):
        rng = random.Random(seed * 1_000_003 + i)
        kind = KINDS[i % len(KINDS)]
        yield i, kind, mutate(data, rng, kind, hlo)


def report(analysis) -> dict:
    doc = analysis.to_json()
    doc.pop("path")
    return doc


def _findings(doc: dict) -> set:
    return {(f["rule"], f["severity"]) for f in doc["findings"]}


def classify(run_dir: Path, xplane_name: str, mutant: bytes, baseline: dict) -> tuple[str, str]:
    """(outcome, detail) of analyzing `mutant` written as run_dir/xplane_name."""
    from advisor.errors import AdvisorError
    from advisor.job import Job
    from advisor.load.loader import load_run
    from advisor.locate import find_runs

    (run_dir / xplane_name).write_bytes(mutant)
    try:
        (run,) = find_runs(run_dir / xplane_name)
        analysis = Job().analyze(load_run(run))
    except AdvisorError as err:
        text = str(err)
        return ("rejected", text) if "\n" not in text.strip() else ("CRASH", f"multi-line error: {text!r}")
    except Exception as err:  # noqa: BLE001 - any other exception is what the fuzzer hunts
        return "CRASH", f"{type(err).__name__}: {err}"
    internal = [n for n in analysis.profile.notes if n.startswith("internal error")]
    if internal:
        return "CRASH", internal[0]
    _LAST_WARNINGS[:] = analysis.profile.warnings
    bad_output = check_outputs(analysis)
    if bad_output:
        return "CRASH", bad_output
    doc = report(analysis)
    if doc == baseline:
        return "same", ""
    if analysis.profile.warnings:
        return "warned", analysis.profile.warnings[0]
    if _findings(doc) == _findings(baseline) and doc["summary"]["step_module"] == baseline["summary"]["step_module"]:
        return "numbers", ""
    return "FINDINGS", f"{sorted(_findings(baseline))} -> {sorted(_findings(doc))}"


def check_outputs(analysis) -> str:
    """Why the analysis's text or JSON report is not what its format allows ('' when both are): JSON
    parsed strictly (no NaN or Infinity), the text free of control characters other than newlines."""
    import io
    import json
    import re

    from rich.console import Console

    from advisor.report import json_report, text

    def refuse(name):
        raise ValueError(f"{name} in the JSON report")
    try:
        json.loads(json_report.render([analysis.document()], "fuzz"), parse_constant=refuse)
        out = io.StringIO()
        text.render([analysis.document()], Console(file=out, width=160, highlight=False, soft_wrap=True), [], "")
    except Exception as err:  # noqa: BLE001 - a renderer that fails is what the fuzzer hunts too
        return f"output: {type(err).__name__}: {err}"
    bad = re.search("[\x00-\x09\x0b-\x1f\x7f-\x9f]", out.getvalue())
    return f"output: control character {bad.group()!r} in the text report" if bad else ""


class Fuzzer:
    """One private copy of a fixture's run folder; mutants overwrite its .xplane.pb in turn."""

    def __init__(self, fixture: str = FIXTURE, parent: Path | None = None):
        from advisor.job import Job
        from advisor.load.loader import load_run
        from advisor.locate import find_runs

        src = fixture_run(fixture)
        self.dir = Path(tempfile.mkdtemp(prefix="advisor-fuzz-", dir=parent)) / "run"
        shutil.copytree(src, self.dir)
        self.xplane = next(self.dir.glob("*.xplane.pb")).name
        self.data = (self.dir / self.xplane).read_bytes()
        self.baseline = report(Job().analyze(load_run(find_runs(self.dir)[0])))

    def run(self, mutant: bytes) -> tuple[str, str]:
        return classify(self.dir, self.xplane, mutant, self.baseline)

    @property
    def last_warnings(self) -> list[str]:
        return list(_LAST_WARNINGS)

    def close(self) -> None:
        shutil.rmtree(self.dir.parent, ignore_errors=True)


_fuzzer = None


def _init(fixture: str, parent: str) -> None:
    global _fuzzer
    _fuzzer = Fuzzer(fixture, Path(parent))


def _one(args) -> tuple[int, str, str, str]:
    i, kind, seed = args
    data = _fuzzer.data
    rng = random.Random(seed * 1_000_003 + i)
    outcome, detail = _fuzzer.run(mutate(data, rng, kind, metadata_range(data)))
    if outcome == "warned":
        detail = " | ".join(_fuzzer.last_warnings)
    return i, kind, outcome, detail


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=10_000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--fixture", default=FIXTURE)
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per mutant before it counts as HANG")
    args = ap.parse_args()

    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    counts: collections.Counter = collections.Counter()
    by_kind: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    bad = []
    xprof_stopped = []      # warned: xprof's converters aborted in their child process
    t0 = time.perf_counter()
    tasks = [(i, KINDS[i % len(KINDS)], args.seed) for i in range(args.n)]
    parent = tempfile.mkdtemp(prefix="advisor-fuzz-pool-")     # the workers' copies, removed at the end
    with ctx.Pool(args.workers, initializer=_init, initargs=(args.fixture, parent), maxtasksperchild=500) as pool:
        pending = [(t, pool.apply_async(_one, (t,))) for t in tasks]
        done = 0
        for (i, kind, _), res in pending:
            try:
                _, _, outcome, detail = res.get(timeout=args.timeout)
            except mp.TimeoutError:
                outcome, detail = "HANG", f"no answer in {args.timeout:.0f} s"
            except Exception as err:  # noqa: BLE001 - a worker that died is a crash
                outcome, detail = "CRASH", f"worker: {type(err).__name__}: {err}"
            counts[outcome] += 1
            by_kind[kind][outcome] += 1
            if outcome in BAD or outcome == "numbers":
                print(f"  mutant {i} ({kind}): {outcome}: {detail[:200]}", flush=True)
            if outcome in BAD:
                bad.append((i, kind, outcome, detail))
            if "xprof's converters stopped" in detail:
                xprof_stopped.append((i, kind, detail))
            done += 1
            if done % 500 == 0:
                print(f"{done}/{args.n} in {time.perf_counter() - t0:.0f} s: {dict(counts)}", flush=True)
    shutil.rmtree(parent, ignore_errors=True)
    elapsed = time.perf_counter() - t0
    print(f"\n{args.n} mutants of fixtures/{args.fixture} (seed {args.seed}, {args.workers} workers) "
          f"in {elapsed:.0f} s")
    for outcome in ("rejected", "same", "warned", "numbers", *BAD):
        print(f"  {outcome:<9} {counts[outcome]:>6}")
    print("by mutation: " + "; ".join(f"{k}: {dict(v)}" for k, v in sorted(by_kind.items())))
    print(f"warned because xprof's converters aborted (in their child process): {len(xprof_stopped)}")
    for i, kind, detail in xprof_stopped[:5]:
        print(f"  mutant {i} ({kind}): {detail[:200]}")
    for i, kind, outcome, detail in bad[:20]:
        print(f"  mutant {i} ({kind}): {outcome}: {detail[:200]}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
