"""Interleaved step-time measurement: two sides timed in the same job, judged on paired ratios.

A busy neighbour on a shared CI runner slows whatever runs while it is busy. Timing the
baseline side and the candidate side in turns (A B, B A, A B, ...), a few steps each, and
judging the ratio of each round's pair, cancels load that slows both sides alike.

Each side is a worker process (`python -m advisor.timing SPEC`, SPEC a JSON object with the
workload, preset and overrides) that compiles the train step once, warms it up, then answers
JSON-line requests on stdin, `{"steps": K}`, with `{"ms": [...]}`: the wall time of each step
(dispatch to block_until_ready). The base side may run under another interpreter
(`--base-python`): another checkout of the code, with advisor installed.
"""

from __future__ import annotations

import dataclasses
import json
import math
import random
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Optional, Sequence

from .child_python import module_command
from .errors import AdvisorError

WARMUP_STEPS = 2


@dataclasses.dataclass
class PairedTiming:
    """Per-round step times (ms) of both sides; round i of `base` pairs with round i of `new`."""
    base: list[list[float]]
    new: list[list[float]]
    # (base worker, candidate worker) of each round, where the sides say (Side.last): the rounds of one
    # pair of processes, whose own offsets (see Side) the noise bound must cover
    who: list[tuple[int, int]] = dataclasses.field(default_factory=list)

    def ratios(self) -> list[float]:
        """Each round's fastest step, candidate over base: load only ever adds time, so a round's
        minimum is its least disturbed step."""
        return [min(n) / min(b) for b, n in zip(self.base, self.new)]


@dataclasses.dataclass
class TimeVerdict:
    judged: bool            # False: the measurements could not support a verdict
    regressed: bool
    ratio: Optional[float]  # the point estimate: median of the paired ratios
    low: Optional[float]    # bootstrap 90% band of that median
    high: Optional[float]
    rounds: int
    why: str = ""           # when not judged, why


def median_band(ratios: Sequence[float], samples: int = 2000, seed: int = 0) -> tuple[float, float]:
    """Bootstrap 90% band of the median of `ratios` (seeded: the same numbers give the same band)."""
    rng = random.Random(seed)
    meds = sorted(statistics.median(rng.choices(ratios, k=len(ratios))) for _ in range(samples))
    return meds[int(0.05 * samples)], meds[int(0.95 * samples) - 1]


def paired_verdict(timing: PairedTiming, budget: float, min_rounds: int = 3) -> TimeVerdict:
    """Regressed when the median paired ratio exceeds 1 + budget: slower in most rounds, so one
    disturbed round cannot fail it. The band is reported, and decides whether to measure more."""
    ratios = timing.ratios()
    if len(ratios) < min_rounds:
        return TimeVerdict(False, False, None, None, None, len(ratios),
                           f"{len(ratios)} paired rounds, at least {min_rounds} needed")
    ratio = statistics.median(ratios)
    low, high = median_band(ratios)
    regressed = ratio > 1 + budget
    return TimeVerdict(True, regressed, ratio, low, high, len(ratios))


def median_rounds(timing: PairedTiming) -> list[tuple[int, float, float]]:
    """The round(s) the median paired ratio comes from, as (round number from 1, base's fastest step
    ms, candidate's): the middle round by ratio, or the two middle ones (the median is the mean of
    their ratios) when the count is even. Their figures are what the verdict's ratio rests on."""
    ratios = timing.ratios()
    order = sorted(range(len(ratios)), key=lambda i: ratios[i])
    mid = len(order) // 2
    picked = sorted(order[mid - 1:mid + 1] if len(order) % 2 == 0 else order[mid:mid + 1])
    return [(i + 1, min(timing.base[i]), min(timing.new[i])) for i in picked]


def needs_more_rounds(verdict: TimeVerdict, budget: float) -> bool:
    """The band straddles the budget line: more rounds would tell."""
    return verdict.judged and verdict.low is not None and verdict.low <= 1 + budget < verdict.high


class Worker:
    """One side: a child process holding a compiled, warmed-up train step. Started at once, so it
    compiles while the parent does other work; the first request waits for it to be ready."""

    def __init__(self, spec: dict, python: Optional[str] = None, label: str = ""):
        self.label = label or spec.get("workload", "worker")
        self.python = python or sys.executable
        # The working folder off sys.path: the base side imports its own advisor, not the one of the
        # folder the check was started in (nor a json.py there).
        cmd = module_command("advisor.timing", json.dumps(spec), python=self.python)
        self._stderr = tempfile.TemporaryFile(mode="w+")
        try:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr,
                                         text=True, bufsize=1)
        except OSError as err:
            raise AdvisorError(f"cannot start the {self.label} timing worker with {self.python}: "
                               f"{err.strerror}") from None
        self.ready: Optional[dict] = None

    def _answer(self) -> dict:
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait()
            self._stderr.seek(0)
            err = [x for x in self._stderr.read().strip().splitlines() if x.strip()]
            raise AdvisorError(f"the {self.label} timing worker ({self.python}) stopped: "
                               f"{err[-1] if err else 'no message'}")
        doc = json.loads(line)
        if "error" in doc:
            raise AdvisorError(f"the {self.label} timing worker ({self.python}) failed: {doc['error']}")
        return doc

    def wait_ready(self) -> dict:
        if self.ready is None:
            self.ready = self._answer()
        return self.ready

    def run(self, steps: int) -> list[float]:
        self.wait_ready()
        self.proc.stdin.write(json.dumps({"steps": steps}) + "\n")
        self.proc.stdin.flush()
        return self._answer()["ms"]

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()
                self.proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
        self._stderr.close()


WORKERS_PER_SIDE = 2


class Side:
    """One side of the comparison run by several worker processes, used in turn, one per round.

    Two processes running the same compiled step can differ by about 10% for as long as they live
    (where the allocator and the loader put their memory): with one process a side, that offset
    is the pair's, and it moves every ratio alike. With two a side, used in turns so that the
    rounds cover every (base, candidate) combination, each side's offset is averaged."""

    def __init__(self, workers: list[Worker], stagger: bool = False):
        self.workers, self.stagger, self.calls, self.last = workers, stagger, 0, 0
        self.label = getattr(workers[0], "label", "")

    def wait_ready(self) -> dict:
        return [w.wait_ready() for w in self.workers][0]

    def run(self, steps: int) -> list[float]:
        n, k = len(self.workers), self.calls
        self.calls += 1
        # base: 0 1 0 1 ..., candidate (staggered): 0 1 1 0 ...: rounds pair (0,0) (1,1) (0,1) (1,0)
        self.last = (k + k // n) % n if self.stagger else k % n
        return self.workers[self.last].run(steps)

    def close(self) -> None:
        for w in self.workers:
            w.close()


def programs_by_side(sides: list[Side]) -> dict[str, list[dict]]:
    """{"base": [...], "new": [...]}: each ready worker's programs compiled and loaded from the cache
    (the sides in the order start_sides gives them, pair after pair)."""
    out: dict[str, list[dict]] = {"base": [], "new": []}
    for i, side in enumerate(sides):
        out["base" if i % 2 == 0 else "new"] += [w.ready["programs"] for w in side.workers
                                                  if w.ready and isinstance(w.ready.get("programs"), dict)]
    return out


def start_sides(base_spec: dict, new_spec: dict, base_python: Optional[str] = None,
                count: Optional[int] = None) -> list[Side]:
    """[base side, candidate side], each `count` worker processes (WORKERS_PER_SIDE), started at once
    (they compile while the caller does other work)."""
    count = WORKERS_PER_SIDE if count is None else count
    bases = [Worker(base_spec, base_python, "base") for _ in range(count)]
    news = [Worker(new_spec, None, "candidate") for _ in range(count)]
    return [Side(bases), Side(news, stagger=True)]


def interleave(base: Worker, new: Worker, rounds: int, steps: int, timing: Optional[PairedTiming] = None
               ) -> PairedTiming:
    """`rounds` more paired rounds; the order alternates (AB, BA, ...) so a drift in load cancels too."""
    timing = timing or PairedTiming([], [])
    for i in range(rounds):
        if (len(timing.base) + i) % 2 == 0:
            b = base.run(steps)
            n = new.run(steps)
        else:
            n = new.run(steps)
            b = base.run(steps)
        timing.base.append(b)
        timing.new.append(n)
        timing.who.append((getattr(base, "last", 0), getattr(new, "last", 0)))
    return timing


def measure(base: Worker, new: Worker, budget: float, rounds: int = 8, steps: int = 2,
            progress=lambda msg: None) -> PairedTiming:
    """Time both sides interleaved; when the band straddles the budget, as many rounds again, once."""
    base.wait_ready()
    new.wait_ready()
    progress(f"timing {rounds} interleaved rounds of {steps} steps (base, candidate)")
    timing = interleave(base, new, rounds, steps)
    verdict = paired_verdict(timing, budget)
    if needs_more_rounds(verdict, budget):
        progress(f"undecided (x{verdict.ratio:.3f}, band x{verdict.low:.3f}-x{verdict.high:.3f}): "
                 f"{rounds} more rounds")
        timing = interleave(base, new, rounds, steps, timing)
    return timing


def confirm(timing: PairedTiming, start_pair, budget: float, rounds: int = 8, steps: int = 2,
            progress=lambda msg: None) -> tuple[PairedTiming, list["Worker"]]:
    """A slowdown, or a verdict still undecided after the extra rounds, measured again by fresh
    workers, all rounds pooled.

    Each process's own offset (see Side) can show a slowdown the code does not have, or hide one
    it has. `start_pair()` starts new (base, candidate) sides; the caller closes those returned.
    A real slowdown is seen by both sets and still fails; one set's offset is halved by the
    pooled median."""
    verdict = paired_verdict(timing, budget)
    if not (verdict.regressed or needs_more_rounds(verdict, budget)):
        return timing, []
    progress(("slower than the budget" if verdict.regressed else "still undecided")
             + ": measuring again with fresh timing workers")
    pair = start_pair()
    again = measure(*pair, budget, rounds, steps, progress)
    return PairedTiming(timing.base + again.base, timing.new + again.new), pair


# --- many configurations, each timed against one reference: --verify, sweep, tune ---------------

TARGET_NOISE = 0.05     # rounds are added until the noise bound is this narrow (or MAX_ROUNDS)...
MIN_ROUNDS = 8          # ...from this many: two cycles of the four (reference, candidate) worker pairs
MAX_ROUNDS = 24
ROUND_MS = 300.0        # each side's share of a round: at least this long (steps from the warm-up step's time)
MAX_ROUND_STEPS = 20
MIN_ROUND_STEPS = 2     # ...and at least this many: the round's minimum is then of several steps
# (These knobs are read when a measurement starts: a test that needs a paired measurement, not a
# precise one, sets MAX_ROUNDS = MIN_ROUNDS and MIN_ROUND_STEPS = 1 for the least that runs the engine.)
# The least noise a measurement states: the rounds of one run cannot see how the machine's load
# changes between runs, which moved back-to-back runs' ratios by 2 to 4% beside a busy core
# (benchmarks/verify_noise.py, docs/benchmarks.md).
NOISE_FLOOR = 0.025


@dataclasses.dataclass
class Measured:
    """One configuration timed against the reference in interleaved paired rounds.

    ratio: the median of the rounds' paired ratios (candidate's fastest step over the reference's);
    low/high: its bootstrap 90% band, widened to cover the spread between the pairs of worker
    processes (each process's own offset, see Side); noise: the band's larger half-width over the
    ratio (at least NOISE_FLOOR), the figure printed beside it."""
    label: str
    ratio: float
    low: float
    high: float
    noise: float
    base_ms: float          # the median over rounds of the reference's fastest step
    new_ms: float           # ... of the candidate's
    rounds: int
    steps: int              # steps per side in each round
    timing: PairedTiming

    @property
    def verdict(self) -> str:
        """faster / slower: the whole band is on that side of 1; otherwise within noise."""
        return "faster" if self.high < 1 else "slower" if self.low > 1 else "within noise"

    def text(self) -> str:
        return f"x{self.ratio:.2f} ±{self.noise:.0%}"

    def to_json(self) -> dict:
        return {"method": "interleaved", "ratio": round(self.ratio, 4),
                "band": [round(self.low, 4), round(self.high, 4)],
                "noise": round(self.noise, 4), "verdict": self.verdict, "base_ms": round(self.base_ms, 3),
                "new_ms": round(self.new_ms, 3), "rounds": self.rounds, "steps_per_round": self.steps}


def summarize(timing: PairedTiming, label: str = "", steps: int = 0) -> Measured:
    """The ratio, its band and the noise bound of a paired timing (at least 2 rounds)."""
    ratios = timing.ratios()
    ratio = statistics.median(ratios)
    low, high = median_band(ratios)
    by_pair: dict[tuple, list[float]] = {}
    for r, who in zip(ratios, timing.who):
        by_pair.setdefault(tuple(who), []).append(r)
    meds = [statistics.median(v) for v in by_pair.values() if len(v) >= 2]
    if len(meds) > 1:   # the pairs of processes disagree: the band must hold each pair's median
        low, high = min(low, min(meds)), max(high, max(meds))
    noise = max(ratio - low, high - ratio, NOISE_FLOOR * ratio) / ratio
    low, high = min(low, ratio * (1 - noise)), max(high, ratio * (1 + noise))
    base_ms = statistics.median(min(b) for b in timing.base)
    new_ms = statistics.median(min(n) for n in timing.new)
    return Measured(label, ratio, low, high, noise, base_ms, new_ms, len(ratios), steps, timing)


def round_steps(sides: Sequence[Side]) -> int:
    """Steps per side per round, so that a round outlasts a scheduler's time slice: from the slowest
    warm-up step the workers reported (at least 2, the round's minimum is of several)."""
    warm = [w.ready.get("warm_ms") for s in sides for w in s.workers if isinstance(w.ready, dict)]
    warm = [x for x in warm if isinstance(x, (int, float)) and x > 0]
    if not warm:
        return MIN_ROUND_STEPS
    return max(MIN_ROUND_STEPS, min(MAX_ROUND_STEPS, math.ceil(ROUND_MS / max(warm))))


def measure_against(reference: Side, candidate: Side, label: str = "", target: float = TARGET_NOISE,
                    min_rounds: Optional[int] = None, max_rounds: Optional[int] = None,
                    deadline: Optional[float] = None, progress=lambda msg: None) -> Measured:
    """Time `candidate` against `reference` in interleaved rounds; more rounds (a cycle of worker pairs
    at a time) while undecided: the noise bound wider than `target`, or the band straddling 1 and
    wider than half of it. `deadline` (time.monotonic()) stops adding rounds. The rounds default to
    MIN_ROUNDS and MAX_ROUNDS."""
    min_rounds = MIN_ROUNDS if min_rounds is None else min_rounds
    max_rounds = MAX_ROUNDS if max_rounds is None else max_rounds
    reference.wait_ready()
    candidate.wait_ready()
    steps = round_steps([reference, candidate])
    cycle = len(reference.workers) * len(candidate.workers)
    timing = interleave(reference, candidate, min_rounds, steps)
    while True:
        m = summarize(timing, label, steps)
        decided = m.noise <= target and (m.verdict != "within noise" or m.noise <= target / 2)
        if decided or m.rounds >= max_rounds or (deadline is not None and time.monotonic() > deadline):
            break
        progress(f"{label}: {m.text()} after {m.rounds} rounds: {cycle} more")
        timing = interleave(reference, candidate, cycle, steps, timing)
    progress(f"{label}: {m.text()} ({m.base_ms:,.1f} -> {m.new_ms:,.1f} ms, {m.rounds} rounds of {steps} steps)")
    return m


class Reference:
    """The reference configuration (the baseline), its worker processes kept while each candidate is
    timed against it in turn: the candidate's workers start, are measured, and stop before the next
    one starts, so at most two processes run steps at a time (the others wait on their stdin)."""

    def __init__(self, spec: dict, count: Optional[int] = None):
        self.count = WORKERS_PER_SIDE if count is None else count
        self.side = Side([Worker(spec, None, "reference") for _ in range(self.count)])

    def time(self, spec: dict, label: str, progress=lambda msg: None, **kw) -> Measured:
        candidate = Side([Worker(spec, None, label) for _ in range(self.count)], stagger=True)
        try:
            return measure_against(self.side, candidate, label, progress=progress, **kw)
        finally:
            candidate.close()

    def close(self) -> None:
        self.side.close()

    def __enter__(self) -> "Reference":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def remeasure(spec: dict, repeats: int = 3, steps: int = 3) -> list[float]:
    """Median step time (ms) of `repeats` more runs of `steps` steps, threaded as the profiled run was."""
    worker = Worker({**spec, "single_thread": False}, label="re-measure")
    try:
        return [round(statistics.median(worker.run(steps)), 3) for _ in range(repeats)]
    finally:
        worker.close()


def _serve(spec: dict) -> None:
    """The worker: build what the spec names, warm it up, say it is ready, then time steps on request."""
    import os

    if spec.get("single_thread", True):
        # One compute thread: with one core taken by a neighbour, a step split over two threads waits
        # for the slower one; one thread runs whole on a free core, and both sides are timed alike.
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_cpu_multi_thread_eigen=false"
                                   " intra_op_parallelism_threads=1").strip()
    import jax

    from advisor import compile_cache

    # The one dispatch point: what a spec names to time (a bundled workload, or the user's own step,
    # FILE.py:FUNCTION or module:function: advisor/entry.py), built into `timed()`, which runs one
    # step and returns its wall time in ms.
    if "entry" in spec:
        from advisor.entry import timed_step
        timed = timed_step(spec)
    else:
        timed = _workload_step(spec)
    warm = [timed() for _ in range(WARMUP_STEPS)]
    cache = compile_cache.counts()
    print(json.dumps({"ready": True, "backend": jax.devices()[0].platform, "warm_ms": warm[-1],
                      "programs": {"compiled": cache["misses"], "loaded": cache["hits"]}}), flush=True)
    for line in sys.stdin:
        steps = int(json.loads(line)["steps"])
        print(json.dumps({"ms": [timed() for _ in range(steps)]}), flush=True)


def _workload_step(spec: dict):
    """A bundled workload's train step, compiled (or loaded from the cache), timed from one state."""
    import os

    import jax

    from advisor import compile_cache, workloads
    from advisor.workload_memory import compile_abstract
    from advisor.workloads.train import zero_metrics

    config = workloads.resolve(spec["workload"], spec.get("preset", "tiny"), spec.get("overrides", []))
    # The one-thread flags are in JAX's cache key, so a traced run's programs never load here: the
    # workers keep theirs with the other untraced compiles, and a side's second worker loads the first's.
    folder = compile_cache.untraced_dir()
    key = json.dumps([spec, os.environ.get("XLA_FLAGS", "")], sort_keys=True)
    with compile_cache.one_compile(folder, key), compile_cache.active(folder=folder):
        built, compiled, minibatch = compile_abstract(spec["workload"], config)
    state0 = built.init_state()
    metrics0 = zero_metrics(built.loss_fn, state0, minibatch)

    def fresh():
        # Every timed step starts from the same state: a step's time can depend on the values it
        # computes (denormals), and two sides that had run different numbers of steps would
        # drift apart. A copy, because a donating step deletes its inputs.
        return jax.block_until_ready(jax.tree_util.tree_map(lambda x: x.copy() if isinstance(x, jax.Array) else x,
                                                            (state0, metrics0)))

    def timed() -> float:
        state, metrics = fresh()
        t0 = time.perf_counter()
        out = compiled(state, metrics, built.batch)
        jax.block_until_ready(out)
        ms = round((time.perf_counter() - t0) * 1e3, 3)
        del out, state, metrics
        return ms

    return timed


def main(argv: Sequence[str]) -> int:
    try:
        spec = json.loads(argv[0])
        _serve(spec)
    except Exception as err:  # noqa: BLE001 - the parent shows it as one line
        print(json.dumps({"error": f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"}),
              flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
