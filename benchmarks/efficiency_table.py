"""advisor's FLOPs, rates, MFU and bound for the committed traces, beside XLA's cost analysis and
xprof's hlo_stats, with the cause of every difference.

For each run folder of fixtures/ (the top-level ones; --all adds the corpus and parallel runs):
- advisor: FLOPs per execution of the step program, matmul FLOP/s over matmul time, MFU, bound
  (peaks from the device table; CPU traces have none unless --peak-flops/--peak-bandwidth);
- XLA: jaxlib's `hlo_module_cost_analysis` of the same optimized module (the trace's HLO), on the
  CPU client;
- xprof 2.24.2: the sum over ops of hlo_stats' model FLOP rate x self time, per execution.

    python benchmarks/efficiency_table.py [--all] [--peak-flops 200G --peak-bandwidth 20GB/s]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
sys.path.insert(0, str(FIXTURES))


def xla_flops(data: bytes) -> float | None:
    """XLA's own count for a serialized HloProto (its module), or None where the CPU client refuses it.
    As XLA gives it: HloCostAnalysis marks each custom-call's FLOPs unknown, -1, and sums them with the
    rest (a module of two cuBLAS calls: -2)."""
    import jax
    from jax._src.lib import xla_client
    from jaxlib import _hlo

    from advisor.load.hlo_proto import HloProto

    proto = HloProto()
    proto.ParseFromString(data)
    try:
        module = _hlo.HloModule.from_serialized_hlo_module_proto(proto.hlo_module.SerializeToString())
        return float(xla_client._xla.hlo_module_cost_analysis(jax.devices("cpu")[0].client, module).get("flops", 0))
    except Exception:  # noqa: BLE001 - a module the CPU client cannot analyze: say so in the table
        return None


def xprof_flops(path: Path, module: str) -> dict[str, tuple[float, float]] | None:
    """What xprof's hlo_stats gives each op of the module over the trace: {op: (FLOPs, occurrences)}."""
    from xprof.convert import raw_to_tool_data

    with tempfile.TemporaryDirectory() as tmp:
        link = Path(tmp) / path.name
        os.symlink(path.resolve(), link)
        try:
            data, _ = raw_to_tool_data.xspace_to_tool_data([str(link)], "hlo_stats", {})
            table = json.loads(data)
        except Exception:  # noqa: BLE001
            return None
    if not isinstance(table, dict) or not table.get("rows"):
        return None
    cols = [c["id"] for c in table["cols"]]
    rate, time, pid = cols.index("model_flop_rate"), cols.index("total_self_time"), cols.index("program_id")
    name, occurrences = cols.index("hlo_op_name"), cols.index("occurrences")
    program = module.rsplit("(", 1)[-1].rstrip(")")
    rows = [r["c"] for r in table["rows"] if str(r["c"][pid]["v"]) == program]
    return {r[name]["v"]: (r[rate]["v"] * 1e9 * r[time]["v"] * 1e-6, r[occurrences]["v"]) for r in rows}


def explain(profile, eff, ours: dict[str, tuple[float, float]], xla: float | None, xprof) -> str:
    """Why the three counts differ, from the numbers. ours: advisor's (FLOPs per execution of the
    program, executions over the trace on all devices) by op; xla: XLA's count as it gives it; xprof:
    xprof_flops."""
    module = profile.modules[profile.step_module]
    execs = eff["program_executions"] or 1          # hlo_stats sums over every device
    total, known = sum(f for f, _ in ours.values()), xla is not None and xla >= 0
    reasons = []
    loops = [i for i in module.instructions.values() if i.opcode == "while"]
    if loops and known and total > 1.05 * xla:
        reasons.append("XLA counts a while body once, advisor once per trip")
    calls = [i for i in module.instructions.values()
             if i.opcode == "custom-call" and i.cost is not None and i.cost.flops]
    gemms = {i.name for i in calls}
    targets = ", ".join(sorted({i.custom_call_target for i in calls}))
    ours_gemm = sum(f for k, (f, _) in ours.items() if k in gemms)
    xp_gemm = sum(f for k, (f, _) in (xprof or {}).items() if k in gemms) / execs
    if gemms:
        said = [f"custom-calls ({targets}): advisor counts them from their shapes",
                "XLA marks each unknown (-1) and " + ("gives no count for the module" if xla is not None and xla < 0
                                                      else "leaves it out" if known else "could not be asked")]
        if xprof is not None and xp_gemm == 0:
            said.append("xprof counts 0 FLOPs")
        elif xprof is not None:
            # xprof's occurrences of the calls against the executions advisor counts of them
            events = (sum(o for k, (_, o) in xprof.items() if k in gemms)
                      / max(sum(n for k, (_, n) in ours.items() if k in gemms), 1))
            said.append(f"xprof counts {xp_gemm:.4g} FLOP/exec for them, x{xp_gemm / ours_gemm:.2f} advisor's"
                        + (f" (it counts {events:.3g} events per execution, docs/gpu.md)" if events > 1.05 else ""))
        reasons.append(", ".join(said))
    if eff.get("unknown_flops_time_share"):
        reasons.append(f"{eff['unknown_flops_time_share']:.0%} of op time in calls without a FLOP count")
    xp_total = sum(f for f, _ in (xprof or {}).values()) / execs
    if profile.backend == "cpu" and xp_total == 0:
        reasons.append("xprof's hlo_stats counts no FLOPs on CPU traces")
    if profile.backend != "cpu" and xprof is not None and xp_total - xp_gemm > 1.05 * (total - ours_gemm):
        reasons.append("xprof's GPU cost model counts elementwise fusions higher (tanh x35, integer RNG x3, a dot "
                       "fusion with its epilogue x2.1 in gpu_scan; see docs/efficiency.md)")
    if known and abs(total - xla) <= 0.01 * max(total, xla, 1):
        reasons.insert(0, "same count as XLA")
    elif known and not loops and not gemms:
        reasons.insert(0, f"{total / xla - 1:+.1%} from XLA: fusion conventions (not traced to one op yet)")
    return "; ".join(reasons) or "-"


def row(run: Path, tmp: Path, peaks=None) -> str:
    """The table's row for one run folder of fixtures/ (copied under tmp to be read)."""
    from snapshot_profile_models import readable_copy

    from advisor.engine import analyze_path
    from advisor.job import Job
    from advisor.load.xprof_tools import start_xprof
    from advisor.report.efficiency_text import pct, rate
    from advisor.settings import Settings
    from advisor.views import ops

    name = str(run.relative_to(FIXTURES)).split("/plugins")[0]
    copy = readable_copy(run, tmp)
    (analysis,) = analyze_path(copy, Job((), settings=Settings(peaks=peaks)))
    profile, eff = analysis.profile, analysis.summary.get("efficiency")
    if not eff or profile.step_module not in profile.modules:
        return f"| {name} | | | | | | | | no HLO for the step program |"
    xplane = next(copy.rglob("*.xplane.pb"))
    protos = start_xprof(xplane).finish(None).hlo_protos
    execs = eff["program_executions"] or 1
    ours: dict[str, tuple[float, float]] = {}      # op -> (FLOPs per execution of the program, executions)
    for r in ops.of(profile).rows:
        if r.module == profile.step_module:
            f, n = ours.get(r.name, (0.0, 0.0))
            ours[r.name] = (f + (r.flops or 0) / (execs / eff["devices"]), n + r.executions * eff["devices"])
    xla = xla_flops(protos[profile.step_module]) if profile.step_module in protos else None
    xp = xprof_flops(xplane, profile.step_module)
    mm = next((c for c in eff["categories"] if c["category"] == "matmul"), None)
    peak = eff.get("peak")
    xla_text = "-" if xla is None or xla < 0 else f"{xla:.4g}"     # below 0: XLA's "unknown", no count
    xp_text = "-" if xp is None else f"{sum(f for f, _ in xp.values()) / execs:.4g}"   # over every device
    return (f"| {name} | {peak['device'] if peak else '-'} | {sum(f for f, _ in ours.values()):.4g} | {xla_text} "
            f"| {xp_text} | {rate(mm['flops_per_s']) if mm else '-'} | {pct(eff['mfu'])} | {eff['bound'] or '-'} | "
            f"{explain(profile, eff, ours, xla, xp)} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--all", action="store_true", help="also the corpus and the parallel runs")
    parser.add_argument("--peak-flops")
    parser.add_argument("--peak-bandwidth")
    args = parser.parse_args()

    from snapshot_profile_models import run_folders

    from advisor.peak_table import user_peaks

    peaks = user_peaks(args.peak_flops, args.peak_bandwidth)
    runs = [r for r in run_folders()
            if args.all or not str(r.relative_to(FIXTURES)).startswith(("corpus", "parallel"))]
    print("| trace | peak | advisor FLOP/exec | XLA FLOP/exec | xprof FLOP/exec | matmul FLOP/s | MFU | bound "
          "| why they differ |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | --- | --- |")
    with tempfile.TemporaryDirectory() as tmp:
        for run in runs:
            print(row(run, Path(tmp), peaks), flush=True)


if __name__ == "__main__":
    main()
