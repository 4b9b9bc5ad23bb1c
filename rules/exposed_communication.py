"""exposed-communication: collectives take a large share of the step, with no compute beside them.

## What it does
For each device, takes the time its collectives (all-reduce, all-gather, reduce-scatter,
all-to-all, collective-permute, found through their HLO opcode) ran inside the steps with no
compute of that device beside them: the exposed communication on the step's critical path.
It splits that time into waiting for peers to arrive (CPU: the rendezvous' `Wait:
pending_threads` events) and the rest, the transfer, and fires when the transfer is a large
share of the step on the median device. Evidence: per step, the exposed time, transfer and
wait apart, the collectives' count, the bytes each device moves (from the HLO operand shapes
and replica groups) and their algorithmic bandwidth.

## Why is this bad?
While a device waits for a collective it computes nothing. Data parallelism all-reduces every
gradient every step: with little compute per step (a small per-device batch) or many small
collectives, the step is bound by communication, and more devices make it worse.

Waiting for peers is reported apart because it is not communication: a device that waits
long while another never waits points at a straggler (see device-imbalance).

## Example
```python
# 2 examples per device, 8 MiB of gradients all-reduced every step
step = jax.jit(train_step)   # batch of 16 sharded over 8 devices
```

## Use instead
The advice follows what the exposed collectives are for (their role in the parallelism view).
Gradient all-reduces (data parallelism): more work per synchronization: a larger per-device batch, or accumulate gradients over several
microbatches before the all-reduce (Part 2.1's `accumulate_gradients` inside `shard_map`, then
one `pmean`). Fewer, larger collectives (XLA combines small ones up to a threshold:
`--xla_gpu_all_reduce_combine_threshold_bytes`). On GPU, overlap collectives with compute:
`XLA_FLAGS="--xla_gpu_enable_async_collectives=true --xla_gpu_enable_latency_hiding_scheduler=true
--xla_gpu_enable_highest_priority_async_stream=true"` as Part 2.1 sets.

Stage-to-stage transfers of a pipeline (`ppermute` inside the schedule loop): grouping cannot
apply; the levers are the microbatch count and size (fewer, larger microbatches mean fewer
transfers, at the price of a larger bubble). Tensor-parallel activation collectives inside the
layers (all-gather / reduce-scatter / psum, permute rings): overlap them with the per-shard
matmuls (Part 4.2's asynchronous `ppermute` rings), or make the tensor axis smaller (more of the
devices on the data or pipeline axis).

On the CPU backend the simulated devices share the host's cores and a collective is a memory
copy between threads: the finding stays `info` there, a pointer to what the same program would
do on accelerators, not a measurement of it.

## Options
- `min_share` (default 0.2): fire when exposed collective transfer is at least this share of the step (median device).
- `small_collective_bytes` (default 1 MiB): collectives under this many bytes per device count as small.
"""  # noqa: E501 - printed as written (advisor explain, SARIF help, docs/rules.md), pinned byte for byte

from __future__ import annotations

from advisor.message import Message
from advisor.model import Profile
from advisor.rule import Rule
from advisor.views import activity, parallelism

MANY_COLLECTIVES = 4      # per step: from this many small collectives, combining them is the advice
CPU_NOTE = ("the CPU backend's simulated devices share the host's cores: collectives here are memory copies "
            "between threads, and their share of the step says little about accelerators")
ON_GPU = ("; overlap them with compute: XLA_FLAGS=\"--xla_gpu_enable_async_collectives=true "
          "--xla_gpu_enable_latency_hiding_scheduler=true --xla_gpu_enable_highest_priority_async_stream=true\"")
MESSAGE = Message(
    title="collectives with no compute beside them take {share:pct} of the step in data transfer ({saving:ms} per step "
          "on the median device {device}), and {wait:ms} more waiting for peers",
    fix="{moved:mib} per device per step in {count:.0f} collective{plural}: do more work per synchronization (a larger "
        "per-device batch, or accumulate gradients over microbatches before the all-reduce){on_gpu}",
    gain="up to {saving:ms} per step if the transfer were hidden or amortized",
    cost="a larger per-device batch needs memory for its activations; accumulation runs the microbatches one after "
         "another{on_cpu}",
)
FSDP = MESSAGE.but(
    fix="{role_count:.0f} FSDP gathers and scatters per step move {role_moved:mib} per device: overlap them with "
        "compute (prefetch the next layer's weights), or shard over fewer devices where memory allows{on_gpu}")
SMALL = MESSAGE.but(      # many small collectives
    fix="{count:.0f} collectives per step move {moved:size} per device, {each:size} each: fewer, larger collectives "
        "(group the gradients into one all-reduce; XLA combines small ones up to "
        "--xla_gpu_all_reduce_combine_threshold_bytes on GPU){on_gpu}")
BY_ROLE = {     # the fix by what the collectives that take the most time do
    "fsdp-gather": FSDP,
    "fsdp-scatter": FSDP,
    "pipeline-transfer": MESSAGE.but(
        fix="{role_count:.0f} stage-to-stage transfers per step move {role_moved:mib} per device{schedule}: grouping "
            "does not apply to a pipeline's transfers; the levers are the microbatch count and size (fewer, larger "
            "microbatches: fewer transfers, a larger bubble; see pipeline-bubble){on_gpu}"),
    "tensor-parallel": MESSAGE.but(
        fix="{role_count:.0f} tensor-parallel activation collectives per step move {role_moved:mib} per device inside "
            "the layers: overlap them with the per-shard matmuls (asynchronous ppermute rings, Part 4.2), or make the "
            "tensor axis smaller (more devices on the data or pipeline axis){on_gpu}"),
}


def _median_device(devices, key):
    ranked = sorted(devices, key=key)
    return ranked[(len(ranked) - 1) // 2]


def _per_step_counts(profile: Profile) -> dict[str, float]:
    """Executions of each collective of the step program per step on one device."""
    devices = max(1, len(profile.hosts[0].devices)) if profile.hosts else 1
    steps = max(1, len(profile.steps))
    return {o.name: o.count / steps / devices for o in profile.ops if o.module == profile.step_module}


def check(profile: Profile, min_share: float = 0.2, small_collective_bytes: int = 1024 * 1024):
    devices = activity.of(profile).devices
    module = profile.modules.get(profile.step_module or "")
    if len(devices) < 2 or module is None:
        return
    median = _median_device(devices, key=lambda d: (d.exposed_ns - min(d.wait_ns, d.exposed_ns)) / max(d.step_ns, 1.0))
    step = median.step_ns
    wait = min(median.wait_ns, median.exposed_ns)
    transfer = median.exposed_ns - wait
    share = transfer / step if step > 0 else 0.0
    if share < min_share:
        return
    counts = _per_step_counts(profile)
    n = len(devices)
    rows = []
    for op, ns in sorted(median.collectives.items(), key=lambda kv: -kv[1]):
        ins = module.instructions.get(op)
        if ins is None:
            continue
        per_step = counts.get(op, 1.0)
        moved = ins.bytes_moved(n) * per_step
        busy = ns - median.collective_wait.get(op, 0.0)
        rows.append({"instruction": op, "opcode": ins.opcode, "per_step": round(per_step, 2),
                     "bytes_per_device": int(moved), "time_ms": round(ns / 1e6, 3),
                     "wait_ms": round(median.collective_wait.get(op, 0.0) / 1e6, 3),
                     "algorithmic_gb_per_s": float(f"{moved / busy:.4g}") if busy > 0 else None})
    view = parallelism.of(profile)
    roles = view.roles if view is not None else {}
    by_role: dict[str, float] = {}
    for r in rows:
        r["role"] = roles.get(r["instruction"], "gradient-sync" if r["opcode"].startswith("all-reduce") else "other")
        by_role[r["role"]] = by_role.get(r["role"], 0.0) + r["time_ms"]
    role = max(by_role, key=by_role.get) if by_role else "other"
    count = sum(r["per_step"] for r in rows)
    moved = sum(r["bytes_per_device"] for r in rows)
    small = count >= MANY_COLLECTIVES and moved / max(count, 1) < small_collective_bytes
    of_role = [r for r in rows if r["role"] == role]
    role_count = sum(r["per_step"] for r in of_role)
    role_moved = sum(r["bytes_per_device"] for r in of_role)
    pipe = view.pipeline if view is not None else None
    cpu = profile.backend == "cpu"
    yield RULE.finding(
        profile, message=BY_ROLE.get(role) or (SMALL if small else MESSAGE), severity="info" if cpu else None,
        impact=share, share=share, saving=transfer, device=median.name, wait=wait, moved=moved, count=count,
        plural="s" if round(count) != 1 else "",
        each=int(moved / count) if count else 0, role_count=role_count, role_moved=role_moved,
        schedule=f" ({pipe.iterations} schedule iterations over {pipe.stages} stages)" if pipe else "",
        on_gpu=ON_GPU if profile.backend == "gpu" else "", on_cpu=f"; {CPU_NOTE}" if cpu else "",
        evidence={
            "devices": n,
            "median_device": median.name,
            "host": median.host,
            "step_ms": round(step / 1e6, 3),
            "exposed_collective_ms": round(median.exposed_ns / 1e6, 3),
            "transfer_ms": round(transfer / 1e6, 3),
            "wait_ms": round(wait / 1e6, 3),
            "transfer_share": round(share, 4),
            "collectives_per_step": round(count, 2),
            "bytes_per_device_per_step": moved,
            "collectives": rows[:5],
            "dominant_role": role,
            "time_ms_by_role": {k: round(v, 3) for k, v in sorted(by_role.items(), key=lambda kv: -kv[1])},
            "transfer_share_by_device": {d.name: round((d.exposed_ns - min(d.wait_ns, d.exposed_ns)) / d.step_ns, 4)
                                         for d in devices if d.step_ns > 0},
        })


def notes(profile: Profile) -> list[str]:
    if profile.backend != "cpu" or len(profile.device_totals) < 2:
        return []
    return [f"{len(profile.device_totals)} simulated CPU devices share this host's cores: per-device compute, "
            "wait and idle times include waiting for a core"]


RULE = Rule(
    id="exposed-communication",
    severity="warning",
    backends=("cpu", "gpu", "tpu"),
    summary="collectives on the critical path take a large share of the step (transfer and waiting apart)",
    check=check,
    message=MESSAGE,
    needs=("hlo",),
    doc=__doc__,
    notes=notes,
)
