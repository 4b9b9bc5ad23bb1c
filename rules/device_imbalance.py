"""device-imbalance: a straggler device or host makes the others wait for it at every collective.

## What it does
Compares the devices' compute time per step (ops other than collectives, on each device's
own op events) across every device of every host. When one device computes much longer than
the typical (median) device, and the others wait for their peers at the collectives while it
hardly waits at all (the straggler's signature: it arrives last), it names that device and its
host, its extra compute per step, what the other devices lose waiting, and the ops where its
extra time goes (against the typical device's time in the same ops).

With several hosts it also looks for a host that launches its steps late: its devices sit idle
(no op running) much longer than the other hosts' devices, with no more compute, while the
other hosts' devices wait for theirs in the collectives. That is the host's own doing: an
input pipeline that delivers the batch late, host-side work between steps, or a compile.

## Why is this bad?
Synchronous data parallelism runs at the pace of the slowest device: every collective waits
for the last participant. One device with more work (an uneven shard, longer sequences,
a data-dependent loop), a slower input pipeline on its host, or a recompilation on one host
makes all the others idle for the difference, every step.

## Example
```python
# each device's shard carries its own loop count; device 5's is 64 times the others'
x = jax.lax.fori_loop(0, iters[0], refine, x)      # inside shard_map
```

## Use instead
Balance the work per device: bucket or pack sequences so that every shard has the same
length, pad data-dependent loops to a common trip count, give every host the same input
pipeline throughput. When one host is slow, check its input pipeline and its compiles.

On the CPU backend the simulated devices share the host's cores, so their compute times vary
by a factor of about two for the same work: the rule asks for a larger excess there
(`cpu_min_ratio`), and stays `info` unless the straggler computes `cpu_warning_ratio` times
as long as the typical device. A balanced program is never called imbalanced: the others
must actually wait for the straggler.

## Options
- `min_ratio` (default 1.5): the straggler computes at least this many times the typical device (GPU/TPU).
- `cpu_min_ratio` (default 3.0): the same on the CPU backend, where devices share cores.
- `cpu_warning_ratio` (default 5.0): on CPU, a warning only from this ratio.
- `min_extra_share` (default 0.1): its extra compute is at least this share of the step.
- `max_wait_ratio` (default 0.5): it waits at most this share of what the typical other device waits.
- `cpu_host_warning_share` (default 0.3): on CPU, a late host is a warning only when its devices' extra
  idle time is at least this share of the step.
"""

from __future__ import annotations

import statistics

from advisor.message import Message
from advisor.model import Profile
from advisor.rule import Rule
from advisor.views import activity

TOP_CAUSES = 3      # ops named as where the straggler's extra time goes
COMPILE_SHARE = 0.5     # a late host's compiles explain its lateness from this share of its extra idle time

MESSAGE = Message(      # a straggler device
    title="straggler: {where} computes {extra:ms} longer per step than the typical device ({ratio:.1f}x), and the "
          "other devices wait for it ({others_wait:ms} per step, typical)",
    fix="balance the work across devices: {where} has more to compute each step{causes} (uneven shards, sequence "
        "lengths or data-dependent loop counts)",
    gain="up to {saving:ms} per step ({gain_share:pct} of the step), the time the others wait for it",
    cost="none at run time once the work is even; padding to a common length computes the padding{on_cpu}",
)
SLOW_HOST = MESSAGE.but(        # every device of one host computes longer
    title="straggler host {host}: its {count} devices compute {host_compute:ms} per step against {their_compute:ms} on "
          "the other hosts' devices, which wait {their_wait:ms} each per step for them",
    fix="look at host {host}: every one of its devices computes longer (slowest {where}{causes}); the same program "
        "computes less elsewhere, so the host itself is slower (its input pipeline, other work on it, its hardware) or "
        "its shards are larger",
    gain="up to {saving:ms} per step ({gain_share:pct} of the step), the time the other hosts' devices wait",
)
LATE_HOST = Message(            # one host's devices idle before each step while the others wait
    title="host {host} launches its steps late: its {count} devices sit idle {idle:ms} per step (the other hosts' "
          "{typical_idle:ms}) while the other hosts' devices wait {their_wait:ms} per step for them in the collectives",
    fix="host {host} leaves its devices idle before each step while the others wait: look at its input pipeline "
        "(prefetch the next batch to the devices while the step runs), host-side work between steps (logging, "
        "checkpoints), and compiles on that host",
    gain="up to {saving:ms} per step, the time the other hosts wait",
    cost="none: the same work, delivered on time{on_cpu}",
)
COMPILING_HOST = LATE_HOST.but(
    fix="host {host} compiles inside its steps ({compile:ms} per step): see the recompilation finding; the other hosts "
        "wait for it")


def check(profile: Profile, min_ratio: float = 1.5, cpu_min_ratio: float = 3.0, cpu_warning_ratio: float = 5.0,
          min_extra_share: float = 0.1, max_wait_ratio: float = 0.5, cpu_host_warning_share: float = 0.3):
    devices = activity.of(profile).devices
    if len(devices) < 2:
        return
    found = list(_straggler_device(profile, min_ratio, cpu_min_ratio, cpu_warning_ratio, min_extra_share,
                                   max_wait_ratio))
    if not found and len(profile.hosts) > 1:
        found = list(_late_host(profile, min_extra_share, max_wait_ratio, cpu_host_warning_share))
    yield from found


def _late_host(profile: Profile, min_extra_share: float, max_wait_ratio: float, cpu_host_warning_share: float):
    """A host whose devices idle (waiting for it to launch the step) while the other hosts' devices wait."""
    view = activity.of(profile)
    hosts = [h for h in profile.hosts if h.devices]
    if len(hosts) < 2:
        return
    late = max(hosts, key=lambda h: statistics.mean(d.idle_ns for d in view.of_host(h.name)))
    mine = view.of_host(late.name)
    theirs = [d for h in hosts if h is not late for d in view.of_host(h.name)]
    compile_ns = view.compile_ns[late.name]
    if not theirs:
        return
    idle, typical_idle = statistics.mean(d.idle_ns for d in mine), statistics.median(d.idle_ns for d in theirs)
    step = statistics.mean(d.step_ns for d in mine)
    extra = idle - typical_idle
    my_wait, their_wait = statistics.mean(d.wait_ns for d in mine), statistics.median(d.wait_ns for d in theirs)
    more_compute = statistics.mean(d.compute_ns for d in mine) - statistics.median(d.compute_ns for d in theirs)
    if step <= 0 or extra < min_extra_share * step or their_wait <= 0 or my_wait > max_wait_ratio * their_wait:
        return
    if more_compute >= extra:
        return      # the devices compute more: a device straggler, not a late launch
    cpu = profile.backend == "cpu"
    severity = ("warning" if extra >= cpu_host_warning_share * step else "info") if cpu else RULE.severity
    compiling = compile_ns >= COMPILE_SHARE * extra
    yield RULE.finding(
        profile, message=COMPILING_HOST if compiling else LATE_HOST, severity=severity, impact=extra / step,
        host=late.name, count=len(mine), idle=idle, typical_idle=typical_idle, their_wait=their_wait,
        compile=compile_ns, saving=min(extra, their_wait),
        on_cpu="; the hosts here are processes on one machine sharing its cores" if cpu else "",
        evidence={
            "host": late.name,
            "devices": [d.name for d in mine],
            "idle_ms": round(idle / 1e6, 3),
            "typical_idle_ms": round(typical_idle / 1e6, 3),
            "extra_idle_ms": round(extra / 1e6, 3),
            "extra_share_of_step": round(extra / step, 4),
            "wait_ms": round(my_wait / 1e6, 3),
            "others_wait_ms": round(their_wait / 1e6, 3),
            "extra_compute_ms": round(more_compute / 1e6, 3),
            "compile_ms_per_step": round(compile_ns / 1e6, 3),
            "likely_cause": "compile" if compiling else "input pipeline or host-side work",
            "hosts": len(hosts),
        })


def _straggler_device(profile: Profile, min_ratio: float, cpu_min_ratio: float, cpu_warning_ratio: float,
                      min_extra_share: float, max_wait_ratio: float):
    devices = activity.of(profile).devices
    slowest = max(devices, key=lambda d: d.compute_ns)
    others = [d for d in devices if d is not slowest]
    typical = statistics.median(d.compute_ns for d in others)
    extra = slowest.compute_ns - typical
    ratio = slowest.compute_ns / typical if typical > 0 else float("inf")
    cpu = profile.backend == "cpu"
    if slowest.step_ns <= 0:
        return
    if ratio < (cpu_min_ratio if cpu else min_ratio) or extra < min_extra_share * slowest.step_ns:
        return
    others_wait = statistics.median(d.wait_ns for d in others)
    if others_wait <= 0 or slowest.wait_ns > max_wait_ratio * others_wait:
        return      # the others do not wait for it: not a straggler
    lost = sum(max(0.0, d.wait_ns - slowest.wait_ns) for d in others)
    causes = _causes(slowest, others, profile.modules.get(profile.step_module or ""))
    hosts = {d.host for d in devices}
    slow_host = None
    if len(hosts) > 1:
        same_host = [d for d in devices if d.host == slowest.host]
        if len(same_host) > 1 and all(d.compute_ns >= slowest.compute_ns / ratio * (cpu_min_ratio if cpu else min_ratio)
                                      for d in same_host):
            slow_host = same_host
    severity = ("warning" if ratio >= cpu_warning_ratio else "info") if cpu else RULE.severity
    gain, host_figures = min(extra, others_wait), {}
    if slow_host:
        # The whole host is slow: name the host, against the other hosts' devices (those that wait).
        theirs = [d for d in devices if d.host != slowest.host]
        host_figures = dict(count=len(slow_host), host_compute=statistics.mean(d.compute_ns for d in slow_host),
                            their_compute=statistics.median(d.compute_ns for d in theirs),
                            their_wait=statistics.median(d.wait_ns for d in theirs))
        gain = min(host_figures["host_compute"] - host_figures["their_compute"], host_figures["their_wait"])
    cause_text = ", ".join(f"{c['op']} ({c['extra_ms']:,.2f} ms more per step)" for c in causes)
    yield RULE.finding(
        profile, message=SLOW_HOST if slow_host else MESSAGE, severity=severity,
        impact=extra / slowest.step_ns if slowest.step_ns else 0.0,
        source=next((c["source"] for c in causes if c["source"]), None), **host_figures,
        where=f"{slowest.name} (host {slowest.host})", host=slowest.host, extra=extra, ratio=ratio,
        others_wait=others_wait, causes=f", mostly in {cause_text}" if causes else "", saving=gain,
        gain_share=gain / slowest.step_ns,
        on_cpu=("; the CPU backend's simulated devices share the host's cores, so part of any difference between them "
                "is scheduling") if cpu else "",
        evidence={
            "straggler": slowest.name,
            "host": slowest.host,
            "compute_ms": round(slowest.compute_ns / 1e6, 3),
            "typical_compute_ms": round(typical / 1e6, 3),
            "extra_compute_ms": round(extra / 1e6, 3),
            "ratio": round(ratio, 2),
            "extra_share_of_step": round(extra / slowest.step_ns, 4) if slowest.step_ns else None,
            "straggler_wait_ms": round(slowest.wait_ns / 1e6, 3),
            "typical_wait_ms": round(others_wait / 1e6, 3),
            "others_lost_waiting_ms": round(lost / 1e6, 3),
            "devices": len(devices),
            "hosts": len(hosts),
            "extra_time_in": causes,
            "slow_host": slowest.host if slow_host else None,
        })


def _causes(slowest, others, module) -> list[dict]:
    """The straggler's ops that take longest beyond the typical device's time in the same op,
    with the source line in the user's code where the HLO attributes one."""
    rows = []
    for op, ns in slowest.top_ops.items():
        typical = statistics.median(d.top_ops.get(op, 0.0) for d in others)
        if ns > typical:
            ins = module.instructions.get(op) if module else None
            rows.append({"op": op, "extra_ms": round((ns - typical) / 1e6, 3), "ms": round(ns / 1e6, 3),
                         "typical_ms": round(typical / 1e6, 3),
                         "source": str(ins.source) if ins is not None and ins.source else None})
    return sorted(rows, key=lambda r: -r["extra_ms"])[:TOP_CAUSES]


RULE = Rule(
    id="device-imbalance",
    severity="warning",
    backends=("cpu", "gpu", "tpu"),
    summary="a straggler device or host computes longer per step and the others wait for it",
    check=check,
    message=MESSAGE,
    doc=__doc__,
)
