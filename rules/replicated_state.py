"""replicated-state: every device holds a full copy of the parameters and optimizer state.

## What it does
Reads the step program's entry parameters and their shardings from its optimized HLO. When
the batch is split over devices (some input is sharded) while the state the step returns
updated (parameters, optimizer state) is replicated, a full copy on every device, and that
copy is a material share of each device's memory peak, it reports the state bytes per
device, their share of the per-device peak and the device count. The cost of the fix comes
from the same HLO: the bytes of the gradient all-reduce the step runs today. Under `jax.pmap`
the state is a stack of one copy per device (each device's slice has a leading dimension of
1) and the step all-reduces the gradients: those copies count as replicated too.

Pipeline and tensor parallelism without FSDP split the state over the model axes (each stage or
shard holds its part) but copy it over the data axis. The parallelism view says which axes the
state is split over and which it is copied over (the axes its gradients are all-reduced over);
the rule fires for such a partly replicated state too, names the axes, and takes the saving of
FSDP over the data axis: the copied state x (1 - 1/|data|). It stays silent where FSDP already
splits the state over data.

The train state is every leaf the step carries: the parameters it returns updated and the inputs
donated to its outputs, so each optimizer leaf counts. FSDP parameters beside AdamW moments built
by `jax.jit(tx.init, out_shardings=replicated)` keep two thirds of the state whole on every device:
the rule names the replicated part beside the split one and says to shard the optimizer state like
the parameters.

## Why is this bad?
Plain data parallelism keeps N identical copies of the parameters and of the optimizer state
(Adam: two more copies of the parameters) on N devices. That memory could hold a larger
batch or model: sharding the state over the data axis (FSDP / ZeRO-3) leaves 1/N of it on
each device.

## Example
```python
mesh = Mesh(jax.devices(), ("data",))
params = jax.device_put(params, NamedSharding(mesh, P()))          # a full copy on each device
step = jax.jit(train_step)                                          # batch sharded P("data")
```

## Use instead
```python
def shard(x):    # split each large leaf over the data axis (Part 2.2's shard_params)
    return NamedSharding(mesh, P("data") if x.ndim and x.shape[0] % mesh.size == 0 and x.size >= 2**16 else P())
params = jax.device_put(params, jax.tree.map(shard, params))
opt_state = jax.device_put(opt_state, jax.tree.map(shard, opt_state))
```
XLA then all-gathers each parameter before use and reduce-scatters its gradient instead of
all-reducing it: about the same bytes per step as the all-reduce (a second all-gather when
the backward pass gathers again), more, smaller collectives, and step time that may grow
where communication is not hidden. Worth it under memory pressure; otherwise it buys room
for a larger batch or model. The bundled Transformer: `--set parallel.fsdp=true`.

## Options
- `min_state_bytes` (default 4 MiB): fire when the replicated state per device is at least this many bytes.
- `min_share` (default 0.1): ...and at least this share of the per-device memory peak.
"""

from __future__ import annotations

from advisor.message import Message
from advisor.model import Profile
from advisor.remedies import Kind, Remedy, buys, memory_pressure, severity
from advisor.rule import Rule
from advisor.views import parallelism
from advisor.views.parallelism.state import state_parameters

MESSAGE = Message(      # data parallelism, the whole state copied
    title="each of the {devices} devices holds a full copy of the {state:mib} train state ({share:pct} of its peak "
          "memory) while the batch is split over them",
    bundled="shard the parameters and optimizer state over the data axis (FSDP): --set parallel.fsdp=true",
    metric="peak_memory",
    gain="about {saving:mib} less memory per device: the state x (1 - 1/{devices})",
    cost="parameters are all-gathered before use (up to {gather:mib} per device per step, twice if the backward pass "
         "gathers again) and gradients reduce-scattered (up to {gather:mib}) instead of all-reduced ({reduced:mib} per "
         "device per step today, from the HLO): about the same bytes in more, smaller collectives; step time grows "
         "where they are not hidden behind compute{buys}",
)
BESIDE = MESSAGE.but(   # part of the state split already (FSDP parameters): the replicated rest
    title="{state:mib} of the train state is replicated on each of the {devices} devices ({share:pct} of its peak "
          "memory) beside {split:mib} split over them: part of the state (optimizer leaves beside sharded parameters, "
          "as AdamW's moments from a replicated jax.jit(tx.init)) is not sharded like the rest",
    fix="shard the optimizer state like the parameters: build it with out_shardings taken from the parameters' "
        "(jax.jit(tx.init, out_shardings=...) per leaf, not one replicated NamedSharding), and keep those shardings in "
        "the step's in_shardings and out_shardings; {advice}",
)
PARTIAL = MESSAGE.but(  # split over the model axes (pipeline stages, tensor shards), copied over data
    title="the {state:mib} train state per device is split over {split} but copied over {over} ({copies} copies, "
          "{share:pct} of each device's peak memory)",
    bundled="shard the parameters and optimizer state over the {axis} axis too (FSDP over {axis}, keeping the {split} "
            "split): --set parallel.fsdp=true",
    gain="about {saving:mib} less memory per device: the copied state x (1 - 1/{size})",
    cost="each step all-gathers the parameters over {axis} before use and reduce-scatters their gradients instead of "
         "all-reducing them ({reduced:mib} per device per step today, from the HLO): about the same bytes in more, "
         "smaller collectives; step time grows where they are not hidden{buys}",
)


def check(profile: Profile, min_state_bytes: int = 4 * 1024 * 1024, min_share: float = 0.1):
    module = profile.modules.get(profile.step_module or "")
    devices = len(profile.device_totals)
    if module is None or profile.memory is None or devices < 2 or profile.memory.peak_bytes <= 0:
        return
    view = parallelism.of(profile)
    state = view.state if view is not None else None
    if state is not None and state.split_over and state.replicated_over:
        yield from _partial(profile, module, view, min_state_bytes, min_share)
        return
    sharded = module.parameter_sharded
    if not any(sharded.get(n) for n in module.parameter_bytes):
        return      # nothing is split over the devices: not data parallelism
    leaves = state_parameters(module)      # parameters and every optimizer leaf
    replicated = {n: module.parameter_bytes[n] for n in leaves if sharded.get(n) is False}
    split = sum(module.parameter_bytes.get(n, 0) for n in leaves if sharded.get(n))
    if not replicated and _pmap_copies(module):
        replicated, split = {n: module.parameter_bytes[n] for n in module.updated_parameters}, 0
    state = sum(replicated.values())
    peak = profile.memory.peak_bytes
    share = state / peak
    if state < min_state_bytes or share < min_share:
        return
    saving = int(state * (1 - 1 / devices))
    collectives = module.collectives()
    all_reduce = sum(i.operand_bytes for i in collectives if i.collective == "all-reduce")
    moved_now = sum(i.bytes_moved(devices) for i in collectives)
    ring = (devices - 1) / devices
    gather = int(min(all_reduce, state) * ring)      # the parameters: at most what is all-reduced as gradients
    # some of the state is split already (FSDP parameters): the replicated rest is what is left to shard
    beside = split * devices >= 0.1 * state
    remedy = Remedy(Kind.FSDP, "state")
    yield RULE.finding(
        profile, message=BESIDE if beside else MESSAGE, remedy=remedy, impact=share * (1 - 1 / devices),
        severity=severity(profile, remedy, share, RULE.severity, saving), devices=devices, state=state, share=share,
        split=split, saving=saving, gather=gather, reduced=int(2 * all_reduce * ring),
        buys="" if memory_pressure(profile) else f"; {buys(profile, saving)}",
        evidence={
            "devices": devices,
            "state_bytes_per_device": state,
            "replicated_inputs": len(replicated),
            "split_state_bytes_per_device": split,
            "peak_bytes_per_device": peak,
            "share_of_peak": round(share, 4),
            "gradient_all_reduce_bytes": all_reduce,
            "collective_bytes_per_device_per_step": moved_now,
            "module": module.key,
        })


def _partial(profile: Profile, module, view, min_state_bytes: int, min_share: float):
    """State split over the model axes (pipeline stages, tensor shards) and copied over data."""
    state = view.state
    peak = profile.memory.peak_bytes
    copied = state.replicated_bytes
    share = copied / peak
    if copied < min_state_bytes or share < min_share:
        return
    data = view.axis(state.data_axis)
    saving = state.fsdp_saving_bytes
    gathers = [r for r in view.collectives if r.role == "gradient-sync" and r.axis == state.data_axis]
    all_reduce = sum(r.bytes_per_step for r in gathers)
    remedy = Remedy(Kind.FSDP, "data_axis")
    yield RULE.finding(
        profile, message=PARTIAL, remedy=remedy, severity=severity(profile, remedy, share, RULE.severity, saving),
        impact=share * (1 - 1 / (data.size if data else 2)), state=copied, split=", ".join(state.split_over),
        over=", ".join(state.replicated_over), copies=data.size if data else "?", share=share,
        axis=state.data_axis, saving=saving, size=data.size if data else "|data|",
        reduced=all_reduce,
        buys="" if memory_pressure(profile) else f"; {buys(profile, saving)}",
        evidence={
            "devices": len(profile.device_totals),
            "state_bytes_per_device": state.bytes_per_device,
            "replicated_bytes_per_device": copied,
            "split_over": state.split_over,
            "replicated_over": state.replicated_over,
            "data_axis_size": data.size if data else None,
            "peak_bytes_per_device": peak,
            "share_of_peak": round(share, 4),
            "gradient_all_reduce_bytes_per_step": all_reduce,
            "fsdp_saving_bytes": saving,
            "module": module.key,
        })


def _pmap_copies(module) -> bool:
    """`jax.pmap`'s layout: every updated input is one slice of a stack with one copy per device
    (leading dimension 1 on each device), and the step all-reduces (the gradients): each device
    holds a full copy of the state, although the HLO calls it split."""
    state = [module.parameter_dims.get(n, ()) for n in module.updated_parameters]
    return (len(state) >= 2 and all(module.parameter_sharded.get(n) for n in module.updated_parameters)
            and all(len(d) >= 1 and d[0] == 1 for d in state)
            and any(i.collective == "all-reduce" for i in module.collectives()))


RULE = Rule(
    id="replicated-state",
    severity="warning",
    backends=("cpu", "gpu", "tpu"),
    summary="data parallelism with the parameters and optimizer state copied on every device (no FSDP)",
    check=check,
    message=MESSAGE,
    needs=("hlo", "buffers"),
    doc=__doc__,
)
