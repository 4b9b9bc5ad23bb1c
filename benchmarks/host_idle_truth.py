"""The device's idle share in a host-paced loop: timed without the profiler, against what advisor reads
from a trace of the same loop recorded in the same run.

The program is the corpus's slow_host_numpy (tests/corpus/): NumPy augmentation of every batch on
the host, a jitted MLP step. Without the profiler it times the augmentation alone, the step alone
(blocked on, with the batch already on the device: the device's work per step) and the loop as the
program runs it; the idle share is 1 - step alone / loop. Then it records the program's own loop
(`main`) and prints the idle share of advisor's idle view, the host-bound finding and the verdict.

    nice -n 5 python benchmarks/host_idle_truth.py [--repeat 10]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")
ROOT = Path(__file__).resolve().parents[1]


def program():
    spec = importlib.util.spec_from_file_location("slow_host_numpy", ROOT / "tests" / "corpus" / "slow_host_numpy.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def untraced(m, repeat: int) -> dict:
    import jax

    rng, images, labels, params, opt = m.setup()
    step = jax.jit(m.train_step, donate_argnums=(0, 1))
    batch = jax.device_put(m.augment(images, rng))
    params, opt, loss = step(params, opt, batch, labels)
    loss.block_until_ready()
    t = time.perf_counter()
    for _ in range(repeat):
        m.augment(images, rng)
    augment = (time.perf_counter() - t) / repeat
    t = time.perf_counter()
    for _ in range(repeat):
        params, opt, loss = step(params, opt, batch, labels)
        loss.block_until_ready()
    alone = (time.perf_counter() - t) / repeat
    t = time.perf_counter()
    for _ in range(repeat):
        params, opt, loss = step(params, opt, m.augment(images, rng), labels)
    loss.block_until_ready()
    loop = (time.perf_counter() - t) / repeat
    return {"augment": augment, "alone": alone, "loop": loop}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args()
    m = program()
    before = untraced(m, args.repeat)
    with tempfile.TemporaryDirectory() as logdir:
        m.main(logdir)
        after = untraced(m, args.repeat)
        from advisor.engine import analyze_path
        from advisor.views import idle

        (analysis,) = analyze_path(logdir)
    for name, t in (("before the recording", before), ("after the recording", after)):
        print(f"untraced, {name}: augment {t['augment'] * 1e3:.1f} ms, step alone {t['alone'] * 1e3:.1f} ms, "
              f"loop {t['loop'] * 1e3:.1f} ms a step: the device idles {1 - t['alone'] / t['loop']:.0%}")
    view = idle.of(analysis.profile)
    found = [f for f in analysis.findings if f.rule == "host-bound"]
    print(f"traced: steps {view.step_ns / len(view.steps) / 1e6:.1f} ms, idle {view.share:.0%} (advisor's idle view); "
          f"host-bound {'fires: ' + found[0].title if found else 'silent'}")
    print(f"verdict: {analysis.summary['efficiency']['verdict']}")
    print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    sys.exit(main())
