"""How fast, and in how much memory, `advisor analyze` reads traces from 10 MB to over 2 GiB.

Records the tiny Transformer for as many steps as each size needs (CPU traces, written under
benchmarks/out/, not committed); sizes above --max-record-mb are made by concatenating the
largest recorded trace's bytes (protobuf reads the copies as one XSpace with its planes
repeated; advisor, like ProfileData, analyzes the first plane of each name, so these rows show
that a file over 2 GiB is read, not the cost per event: the fits leave them out), and the
--longer sizes by repeating the largest recording's host lines in time (longer_trace.py: a
longer run, every op of which is analyzed), written under /tmp and deleted at the end. Then,
each in a fresh process that does nothing else and reads its own peak RSS (VmHWM) at the end:

- floor: `jax.profiler.ProfileData.from_file`, reading every event's name and duration once,
  and freeing the ProfileData (advisor pays that too); only on files up to --max-floor-mb,
  since ProfileData needs about 11x the file in RAM and cannot parse a file over 2 GiB;
- analyze: advisor's whole analysis of the file (load, HLO, memory viewer, rules), in process,
  imports excluded (the RSS after imports is printed apart); xprof's converters run in a child
  process on the slice of the file that holds the HLO (its own peak is not in this figure: a
  forked child's ru_maxrss starts from its parent's RSS, so it cannot be told apart here);
- the timeline alone (advisor.load.loader.load_timeline: the streaming reader into columns);
- with --events-db, xprof's events database: xspace_to_parquet + a DuckDB group-by of op time;
- with --baseline DIR, advisor's analysis again with the advisor package (and rules) of DIR, a copy of
  an earlier commit (`git archive COMMIT | tar -x -C DIR`), in the same turns: before and after, side by side.

Prints one row per size (median time of --repeat interleaved runs), analyze / floor, the fitted
cost per MB and per event of both, and the extrapolation to a 10 GB trace.

    nice -n 10 python benchmarks/analyze_speed.py [--sizes 10,100,300,1000,2300] [--longer 1000,3000,10000]
        [--repeat 3] [--events-db] [--baseline DIR]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Optional

OUT = Path(__file__).resolve().parent / "out" / "scaling"
BIG = Path("/tmp/advisor_analyze_speed")

_HWM = r"""
def _mib(key):
    for line in open("/proc/self/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024
"""

FLOOR = _HWM + r"""
import json, sys, time
from jax.profiler import ProfileData
base = _mib("VmRSS")
t0 = time.perf_counter()
pd = ProfileData.from_file(sys.argv[1])
parsed = time.perf_counter()
n = 0
total = 0.0
for plane in pd.planes:
    for line in plane.lines:
        for ev in line.events:
            name = ev.name
            total += ev.duration_ns
            n += 1
read = time.perf_counter()
del pd, plane, line, ev
done = time.perf_counter()
print(json.dumps({"s": done - t0, "parse_s": parsed - t0, "read_s": read - parsed, "free_s": done - read,
                  "events": n, "hwm_mib": _mib("VmHWM"), "base_mib": base}))
"""

ANALYZE = _HWM + r"""
import json, sys, time
import jax.profiler  # imports are not part of the measured analysis
from advisor.engine import analyze_path
base = _mib("VmRSS")
t0 = time.perf_counter()
analyses = analyze_path(sys.argv[1])
done = time.perf_counter()
print(json.dumps({"s": done - t0, "findings": [f.rule for f in analyses[0].findings],
                  "hwm_mib": _mib("VmHWM"), "base_mib": base}))
"""

# The timeline alone (the streaming reader and the profile model's columns), without xprof's converters.
READ = _HWM + r"""
import json, sys, time
import jax.profiler
from advisor.load.loader import load_timeline
base = _mib("VmRSS")
t0 = time.perf_counter()
timeline = load_timeline(sys.argv[1])
done = time.perf_counter()
ops = timeline.device_ops
print(json.dumps({"s": done - t0, "hwm_mib": _mib("VmHWM"), "base_mib": base, "ops": len(ops) if ops else 0,
                  "spilled_mb": ops.store.spilled_bytes / 1e6 if ops else 0.0}))
"""

# xprof's events database: the XSpace converted to Parquet by xprof's C++ (xspace_to_parquet), then
# op time by name aggregated by DuckDB: the alternative reader the issue asks to measure.
EVENTS_DB = _HWM + r"""
import json, sys, tempfile, time, os
import duckdb
from xprof.convert.events_db.python import pywrap_events_db_c_api as events_db
base = _mib("VmRSS")
with tempfile.TemporaryDirectory() as tmp:
    out = os.path.join(tmp, "events.parquet")
    t0 = time.perf_counter()
    events_db.xspace_to_parquet(input_path=sys.argv[1], output_path=out)
    converted = time.perf_counter()
    rows = duckdb.sql(f"select coalesce(hlo_op, kernel_name, tf_op_name) as op, sum(self_time_ns), count(*) "
                      f"from '{out}' group by all").fetchall()
    done = time.perf_counter()
print(json.dumps({"s": done - t0, "convert_s": converted - t0, "query_s": done - converted, "hwm_mib": _mib("VmHWM"),
                  "base_mib": base, "groups": len(rows)}))
"""

RECORD = r"""
import shutil, sys
from pathlib import Path
from advisor import runner, workloads
steps, out = int(sys.argv[1]), Path(sys.argv[2])
shutil.rmtree(out, ignore_errors=True)
config = workloads.resolve("transformer", "tiny", [f"train.steps={steps}"])
run_dir = runner.profile_workload("transformer", "tiny", config, out, lambda m: None)
print(next(run_dir.glob("*.xplane.pb")))
"""

_MB_PER_STEP = 0.29   # tiny Transformer: about 31.5 MB for 110 profiled steps


def record(target_mb: float, reuse: bool) -> Path:
    out = OUT / f"{int(target_mb)}mb"
    existing = sorted(out.rglob("*.xplane.pb"))
    if reuse and existing:
        return existing[-1]
    steps = max(2, round(target_mb / _MB_PER_STEP))
    print(f"recording the tiny Transformer for {steps} steps (~{target_mb:.0f} MB) ...", flush=True)
    proc = subprocess.run([sys.executable, "-c", RECORD, str(steps), str(out)], capture_output=True, text=True,
                          check=True)
    return Path(proc.stdout.strip().splitlines()[-1])


def concatenated(src: Path, target_mb: float) -> Path:
    copies = max(2, round(target_mb * 1e6 / src.stat().st_size))
    dst = BIG / f"{int(target_mb)}mb" / "plugins" / "profile" / "run" / "host.xplane.pb"
    dst.parent.mkdir(parents=True, exist_ok=True)
    data = src.read_bytes()
    with open(dst, "wb") as f:
        for _ in range(copies):
            f.write(data)
    return dst


def longer(src: Path, target_mb: float) -> Path:
    from longer_trace import make_longer

    copies = max(2, round(target_mb * 1e6 / src.stat().st_size))
    dst = BIG / f"longer_{int(target_mb)}mb" / "plugins" / "profile" / "run" / "host.xplane.pb"
    dst.parent.mkdir(parents=True, exist_ok=True)
    print(f"writing {copies} copies of {src.name} in time ({target_mb:.0f} MB) ...", flush=True)
    make_longer(src, dst, copies)
    return dst


# The advisor package of another checkout: first on sys.path, and its rules and workloads folders found
# as advisor.rules and advisor.workloads (as the package's install maps them).
_BASELINE = """import sys
sys.path.insert(0, {dir!r})
import advisor
advisor.__path__.append({dir!r})
"""


def child(code: str, path: Path, package_dir: Optional[str] = None) -> dict:
    """Run code on path in a fresh process; with package_dir, with the advisor package of that checkout."""
    if package_dir is not None:
        code = _BASELINE.format(dir=package_dir) + code
    proc = subprocess.run([sys.executable, "-c", code, str(path.resolve())], capture_output=True, text=True,
                          cwd=package_dir)
    if proc.returncode:
        return {"error": (proc.stderr.strip().splitlines() or ["?"])[-1][:200]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def fit(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Least-squares slope and intercept."""
    if len(xs) < 2:
        return (ys[0] / xs[0] if xs else 0.0), 0.0
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx else 0.0
    return slope, my - slope * mx


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10,100,300,1000,2300", help="trace sizes in MB")
    ap.add_argument("--max-record-mb", type=float, default=300.0, help="larger sizes concatenate a recording")
    ap.add_argument("--longer", default="", help="sizes in MB of longer runs made from the largest recording")
    ap.add_argument("--max-floor-mb", type=float, default=400.0, help="run ProfileData only up to this size")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--reuse", action="store_true", help="reuse recordings under benchmarks/out/ if present")
    ap.add_argument("--keep", action="store_true", help=f"keep the concatenated files under {BIG}")
    ap.add_argument("--events-db", action="store_true",
                    help="also measure xprof's events database (xspace_to_parquet + DuckDB), up to --max-floor-mb")
    ap.add_argument("--baseline", metavar="DIR",
                    help="also measure the analysis with the advisor package of DIR (a checkout of an earlier commit)")
    args = ap.parse_args()

    sizes = sorted(float(s) for s in args.sizes.split(","))
    traces: list[tuple[Path, str]] = []   # (file, "recorded", "longer" or "concatenated")
    largest = None
    try:
        for mb in sizes:
            if mb <= args.max_record_mb or largest is None:
                largest = record(mb, args.reuse)
                traces.append((largest, "recorded"))
            else:
                traces.append((concatenated(largest, mb), "concatenated"))
        for mb in sorted(float(s) for s in args.longer.split(",") if s):
            traces.append((longer(largest, mb), "longer"))
        traces.sort(key=lambda t: (t[1] == "concatenated", t[0].stat().st_size))
        rows = [measure(path, kind, args) for path, kind in traces]
    finally:
        if not args.keep:
            shutil.rmtree(BIG, ignore_errors=True)
    report(rows)


def measure(path: Path, kind: str, args) -> dict:
    size = path.stat().st_size
    run_floor = size / 1e6 <= args.max_floor_mb
    floors, analyses, reads, dbs, bases = [], [], [], [], []
    for _ in range(args.repeat):
        if run_floor:
            floors.append(child(FLOOR, path))
        analyses.append(child(ANALYZE, path))
        if args.baseline:
            bases.append(child(ANALYZE, path, str(Path(args.baseline).resolve())))
        reads.append(child(READ, path))
        if args.events_db and size / 1e6 <= args.max_floor_mb:
            dbs.append(child(EVENTS_DB, path))
    row = {"mb": size / 1e6, "kind": kind}
    ok = [a for a in analyses if "error" not in a]
    if not ok:
        row["error"] = analyses[0]["error"]
    else:
        row.update(analyze_s=statistics.median(a["s"] for a in ok), analyze_hwm=max(a["hwm_mib"] for a in ok),
                   analyze_base=min(a["base_mib"] for a in ok), findings=ok[0]["findings"])
    good = [b for b in bases if "error" not in b]
    if good:
        row.update(base_s=statistics.median(b["s"] for b in good), base_hwm=max(b["hwm_mib"] for b in good),
                   base_findings=good[0]["findings"])
    elif bases:
        row["base_error"] = bases[0]["error"]
    for key, runs in (("read", reads), ("db", dbs)):
        good = [r for r in runs if "error" not in r]
        if good:
            row[f"{key}_s"] = statistics.median(r["s"] for r in good)
            row[f"{key}_hwm"] = max(r["hwm_mib"] for r in good)
        elif runs:
            row[f"{key}_error"] = runs[0]["error"]
    if reads and "read_s" in row:
        row["ops"], row["spilled_mb"] = reads[0]["ops"], reads[0]["spilled_mb"]
    good = [f for f in floors if "error" not in f]
    if good:
        row.update(floor_s=statistics.median(f["s"] for f in good), floor_hwm=max(f["hwm_mib"] for f in good),
                   floor_base=min(f["base_mib"] for f in good), events=good[0]["events"],
                   floor_parts=[statistics.median(f[k] for f in good) for k in ("parse_s", "read_s", "free_s")])
    print(f"  measured {path} ({row['mb']:.1f} MB)", flush=True)
    return row


def report(rows: list[dict]) -> None:
    print()
    print("| file | events | ops | floor | advisor | advisor / floor | timeline alone | peak RSS floor "
          "| peak RSS advisor | events DB |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        name = f"{r['mb']:,.1f} MB" + {"recorded": "", "longer": " (the largest recording repeated in time)",
                                        "concatenated": " (concatenated copies: the first copy's planes are "
                                                        "analyzed)"}[r["kind"]]
        events = f"{r['events'] / 1e6:.2f} M" if "events" in r else "-"
        floor = f"{r['floor_s']:.2f} s" if "floor_s" in r else "not run"
        floor_rss = f"{r['floor_hwm']:,.0f} MiB" if "floor_hwm" in r else "-"
        ops = f"{r['ops'] / 1e6:.2f} M" if "ops" in r else "-"
        read = (f"{r['read_s']:.2f} s, {r['read_hwm']:,.0f} MiB, {r['spilled_mb']:,.0f} MB of ops on disk"
                if "read_s" in r else "-")
        db = (f"{r['db_s']:.2f} s, {r['db_hwm']:,.0f} MiB" if "db_s" in r
              else f"failed: {r['db_error']}" if "db_error" in r else "-")
        if "error" in r:
            print(f"| {name} | {events} | {ops} | {floor} | failed: {r['error']} | - | {read} | {floor_rss} | - "
                  f"| {db} |")
            continue
        ratio = f"{r['analyze_s'] / r['floor_s']:.2f}x" if "floor_s" in r else "-"
        print(f"| {name} | {events} | {ops} | {floor} | {r['analyze_s']:.2f} s | {ratio} | {read} | {floor_rss} "
              f"| {r['analyze_hwm']:,.0f} MiB | {db} |")
    for r in rows:
        if "base_s" in r and "analyze_s" in r:
            ratio = f" ({r['base_s'] / r['floor_s']:.2f}x the floor)" if "floor_s" in r else ""
            same = "the same findings" if r["base_findings"] == r["findings"] else f"findings {r['base_findings']}"
            print(f"baseline at {r['mb']:.0f} MB: {r['base_s']:.2f} s{ratio}, peak RSS {r['base_hwm']:,.0f} MiB, "
                  f"{same}; this tree {r['analyze_s']:.2f} s: {r['base_s'] / r['analyze_s']:.2f}x faster")
        elif "base_error" in r:
            print(f"baseline at {r['mb']:.0f} MB failed: {r['base_error']}")
    measured = [r for r in rows if "analyze_s" in r and r["kind"] != "concatenated"]
    both = [r for r in measured if "floor_s" in r]
    if rows and "analyze_base" in rows[0]:
        print(f"\nRSS after the interpreter and imports, before the analysis: {rows[0]['analyze_base']:,.0f} MiB")
    for r in both:
        parse, read, free = r["floor_parts"]
        print(f"floor at {r['mb']:.0f} MB: parse {parse:.2f} s + read names and durations {read:.2f} s "
              f"+ free {free:.2f} s; findings: {', '.join(r['findings']) or 'none'}")
    if len(measured) >= 2:
        a_mb, a0 = fit([r["mb"] for r in measured], [r["analyze_s"] for r in measured])
        m_mb, m0 = fit([r["mb"] for r in measured], [r["analyze_hwm"] for r in measured])
        print(f"\nadvisor: {a_mb * 1000:.1f} ms per MB (+{a0:.2f} s fixed), peak RSS {m_mb:+.2f} MiB per MB "
              f"(+{m0:,.0f} MiB)")
        if len(both) >= 2:
            a_ev, _ = fit([r["events"] / 1e6 for r in both], [r["analyze_s"] for r in both])
            f_mb, f0 = fit([r["mb"] for r in both], [r["floor_s"] for r in both])
            f_ev, _ = fit([r["events"] / 1e6 for r in both], [r["floor_s"] for r in both])
            fm_mb, fm0 = fit([r["mb"] for r in both], [r["floor_hwm"] for r in both])
            print(f"advisor: {a_ev * 1000:.0f} ns per event; floor: {f_mb * 1000:.1f} ms per MB, "
                  f"{f_ev * 1000:.0f} ns per event, peak RSS {fm_mb:+.2f} MiB per MB")
            print(f"floor at 10 GB (extrapolated): {(f0 + f_mb * 1e4) / 60:.1f} min, "
                  f"{(fm0 + fm_mb * 1e4) / 1024:.0f} GiB of RAM (and ProfileData cannot parse over 2 GiB)")
        low, high = min(measured, key=lambda r: r["analyze_hwm"]), max(measured, key=lambda r: r["analyze_hwm"])
        print(f"advisor peak RSS over {len(measured)} sizes: {low['analyze_hwm']:,.0f} MiB ({low['mb']:,.0f} MB) to "
              f"{high['analyze_hwm']:,.0f} MiB ({high['mb']:,.0f} MB)")
        print(f"advisor at 10 GB (extrapolated): {(a0 + a_mb * 1e4) / 60:.1f} min")


if __name__ == "__main__":
    main()
