"""pipeline-bubble: a pipeline's schedule spends a large share of its iterations on padding.

## What it does
Reads the pipeline from the parallelism view: a loop whose body passes activations stage to
stage with a `ppermute` ring over one mesh axis (S stages), run for L*M + S - 1 iterations for
M microbatches and L loops (layers per stage of a looping pipeline). Every stage runs every
iteration, S - 1 of them on zero padding, so the bubble, (S - 1) / (L*M + S - 1) of the
pipeline's compute, is in the program, not in any idle time a trace could show. It fires when
the bubble is above `max_bubble`, with the microbatch count that brings it under, the step
time that would save (the measured time of the schedule loops, forward and backward, scaled by
the counts) and the cost.

## Why is this bad?
In an SPMD pipeline (the tutorial's Part 3.1) each of the S devices computes on padding for
S - 1 of the iterations: with 4 stages and 2 microbatches, 3 of 5 iterations (60%) are wasted
on every device. The work per step is the same; the padding is pure overhead.

## Example
```python
# 4 stages over the 'pipe' axis, the batch in 2 microbatches: 5 iterations, 3 of them padding
jax.lax.fori_loop(0, num_microbatches + num_stages - 1, pipeline_step, carry)
```

## Use instead
More microbatches: the bubble shrinks as (S - 1) / (L*M + S - 1); M >= 4 S keeps it near 15%
(GPipe's rule of thumb). Or a looping pipeline (Part 3.2: L layers per stage, round-robin), which
multiplies the work iterations by L for the same padding. The bundled Transformer:
`--set parallel.pipeline.microbatches=16`.

The cost: smaller microbatches use each device less well (smaller matmuls), and every iteration
sends a transfer, so there are more and smaller stage-to-stage transfers (a looping pipeline sends
L times more). The gain is computed assuming the per-microbatch utilization stays the same: the
measured schedule time, scaled by (1 + (S-1)/(L*M')) / (1 + (S-1)/(L*M)).

## Options
- `max_bubble` (default 0.2): fire when the bubble is above this share of the pipeline's iterations.
"""

from __future__ import annotations

from advisor.message import Message
from advisor.model import Profile
from advisor.remedies import Kind, Remedy, severity
from advisor.rule import Rule
from advisor.views import parallelism, step_time

MAX_FACTOR = 64     # look at most this many times the microbatches today
MESSAGE = Message(
    title="pipeline bubble: {bubble:pct} of the schedule's iterations are padding ({padding} of {iterations} per "
          "stage; {counts} over {axis})",
    bundled="split the batch into {target} microbatches instead of {m}: the bubble drops from {bubble:pct} to "
            "{after:pct}{loops} (--set parallel.pipeline.microbatches={target})",
    gain="about {saving:ms} per step on each device: the schedule loops' measured {now:ms} scaled by "
         "(1 + (S-1)/(L*M')) / (1 + (S-1)/(L*M)), at the same utilization per microbatch",
    cost="microbatches {smaller:g}x smaller: smaller matmuls use each device less well; {transfers} instead of "
         "{iterations} stage-to-stage transfers per schedule, each {smaller:g}x smaller; the schedule loop's saved "
         "activations per iteration shrink with the microbatch",
)
YOUR_CODE = MESSAGE.but(        # not a bundled workload: a looping pipeline is the other lever
    fix="split the batch into {target} microbatches instead of {m}{loops}: the bubble drops from {bubble:pct} to "
        "{after:pct} of the pipeline's iterations; or a looping pipeline (Part 3.2: L layers per stage, round-robin), "
        "which multiplies the work iterations by L for the same S - 1 padding iterations")


def target_microbatches(pipe, max_bubble: float, batch: int = 0) -> int:
    """The smallest M' = M x 2^k whose bubble is at most `max_bubble` (M x MAX_FACTOR at most); where
    the batch on each data device is known (a bundled workload), the largest such M' dividing it."""
    m = pipe.microbatches or pipe.work_iterations
    target = m
    while pipe.bubble_with(target) > max_bubble and target < m * MAX_FACTOR:
        if batch and (batch % (target * 2) or target * 2 > batch):
            break
        target *= 2
    return target


def _local_batch(profile: Profile) -> int:
    """The batch on each data device of a bundled workload (0: unknown)."""
    config = profile.run_metadata.get("config") if profile.run_metadata.get("workload") else None
    if not isinstance(config, dict):
        return 0
    batch = (config.get("data") or {}).get("batch_size") or 0
    return batch // max(1, (config.get("parallel") or {}).get("data", 1))


def check(profile: Profile, max_bubble: float = 0.2):
    view = parallelism.of(profile)
    pipe = view.pipeline if view is not None else None
    if pipe is None or pipe.bubble_fraction <= max_bubble:
        return
    known = pipe.microbatches is not None
    m = pipe.microbatches or pipe.work_iterations
    target = target_microbatches(pipe, max_bubble, _local_batch(profile))
    if target == m:
        return      # no more microbatches fit the batch: nothing to advise but a larger batch
    after = pipe.bubble_with(target)
    now_ns = pipe.time_s * 1e9
    saving_ns = max(0.0, now_ns - pipe.time_with(target) * 1e9)
    step_ns = step_time.of(profile).median_ns or 0.0
    share = saving_ns / step_ns if step_ns else pipe.bubble_fraction - after
    loops = pipe.loops or 1
    remedy = Remedy(Kind.MORE_MICROBATCHES, "pipeline", target)
    yield RULE.finding(
        profile, message=MESSAGE if profile.run_metadata.get("workload") else YOUR_CODE, remedy=remedy,
        severity=severity(profile, remedy, share, RULE.severity), impact=share, bubble=pipe.bubble_fraction,
        padding=pipe.padding_iterations, iterations=pipe.iterations, axis=pipe.axis, target=target, m=m, after=after,
        counts=(f"{pipe.stages} stages, {m} microbatches" + (f" x {loops} loops" if loops > 1 else "") if known
                else f"{pipe.stages} stages, {m} microbatch-iterations (microbatches x loops)"),
        loops=f" (loops x microbatches {loops * target})" if loops > 1 else "", saving=saving_ns, now=now_ns,
        smaller=target / m, transfers=pipe.stages - 1 + loops * target,
        evidence={
            "stages": pipe.stages,
            "microbatches": pipe.microbatches,
            "loops": pipe.loops,
            "iterations": pipe.iterations,
            "padding_iterations": pipe.padding_iterations,
            "bubble_fraction": round(pipe.bubble_fraction, 4),
            "axis": pipe.axis,
            "schedule_time_ms_per_step": round(now_ns / 1e6, 3),
            "target_microbatches": target,
            "bubble_fraction_after": round(after, 4),
            "step_ms": round(step_ns / 1e6, 3) if step_ns else None,
        })


RULE = Rule(
    id="pipeline-bubble",
    severity="warning",
    backends=("cpu", "gpu", "tpu"),
    summary="a pipeline's schedule runs many padding iterations: more microbatches (or a looping pipeline) shrink it",
    check=check,
    message=MESSAGE,
    needs=("hlo",),
    doc=__doc__,
)
