"""What the efficiency view costs: `advisor analyze` on the ~90 MB recording of analyze_speed.py,
with and without it, interleaved.

"Without" replaces the HLO cost count (advisor/load/hlo_cost.py, once per program) with nothing
and the view (advisor/views/efficiency.py) with None; everything else (the reader, xprof's
converters, the rules) runs as usual. Each run is in this process, the imports done before; the
sides alternate so a busy neighbour slows both. Prints each side's fastest and median run and the
ratio of the fastest (target: at most x1.10, issue 19), then the two parts timed alone.

    nice -n 10 python benchmarks/efficiency_overhead.py [--mb 90] [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=float, default=90.0)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    from analyze_speed import record

    from advisor.engine import analyze_path
    from advisor.load import hlo, hlo_cost
    from advisor.views import efficiency

    path = record(args.mb, reuse=True)
    size = path.stat().st_size / 1e6
    real_cost, real_view = hlo.ModuleCost, efficiency._build

    class NoCost(real_cost):
        """What runs where, as ModuleCost says, and no instruction's FLOPs or bytes counted."""

        def __init__(self, module, opcodes=None):
            self.comps = {c.id: c for c in module.computations}
            entry = next((c for c in module.computations if c.name == module.entry_computation_name), None)
            self.runs = hlo_cost._runs(self.comps, entry.id if entry is not None else None)
            self.costs = {}

        def runs_per_execution(self):
            return {}

        def matmul_dims(self):
            return {}

        def layout_ops(self):
            return set()

    def without():
        hlo.ModuleCost = NoCost
        efficiency._build = lambda profile: None

    def with_():
        hlo.ModuleCost, efficiency._build = real_cost, real_view

    times: dict[str, list[float]] = {"without": [], "with": []}
    analyze_path(path)      # warm: imports, xprof's first start
    for i in range(args.repeat):
        for side, setup in (("without", without), ("with", with_)) if i % 2 == 0 else \
                (("with", with_), ("without", without)):
            setup()
            t0 = time.perf_counter()
            (analysis,) = analyze_path(path)
            times[side].append(time.perf_counter() - t0)
            if side == "with":
                eff = analysis.summary["efficiency"]
    with_()
    a, b = min(times["without"]), min(times["with"])
    print(f"{path} ({size:.0f} MB), {args.repeat} runs per side, interleaved")
    print(f"{'side':<10}{'fastest s':>10}{'median s':>10}  runs")
    for side in ("without", "with"):
        print(f"{side:<10}{min(times[side]):>10.2f}{statistics.median(times[side]):>10.2f}  "
              f"{', '.join(f'{t:.2f}' for t in times[side])}")
    print(f"with / without, fastest runs: x{b / a:.3f}  (target at most x1.10; on a busy machine the runs "
          "spread more than that: the parts timed alone below are the firmer figure)")
    print(f"efficiency: {eff['flops_per_step']:.4g} FLOP per step over {eff['steps']} steps, "
          f"{len(eff['ops'])} op rows kept")
    # the two parts timed alone: the count over every program's HLO, and the view over the loaded run
    from advisor.load.hlo_cost import module_cost
    from advisor.load.hlo_proto import HloProto
    from advisor.load.xprof_tools import start_xprof

    protos = start_xprof(path).finish(None).hlo_protos
    t0 = time.perf_counter()
    for data in protos.values():
        proto = HloProto()
        proto.ParseFromString(data)
        module_cost(proto.hlo_module)
    count_s = time.perf_counter() - t0
    for name in ("ops", "peak", "efficiency"):
        analysis.profile.views.pop(name, None)
    t0 = time.perf_counter()
    efficiency.of(analysis.profile)
    view_s = time.perf_counter() - t0
    print(f"alone: HLO cost count {count_s * 1e3:.0f} ms ({len(protos)} programs, parse included), view "
          f"{view_s * 1e3:.0f} ms: {(count_s + view_s) / a:.1%} of the analysis without them")


if __name__ == "__main__":
    main()
