"""The host plane's threads: step marks, compile / sync / transfer events, allocator peaks, and the
XLA CPU executor threads where the CPU backend runs its ops."""

from __future__ import annotations

import re
from typing import Optional

from ..model import AllocatorPeak, HostEvent, Transfer
from .ops import module_key, stat_dict

# Host thread lines where XLA's CPU runtime executes HLO ops.
CPU_EXECUTOR_PREFIXES = ("tf_XLA",)
# Host lines that never carry step annotations (executors, driver callbacks, dispatch pools).
_NOT_STEP_LINES = ("tf_XLA", "Host Threads", "tf_pjrt", "py_xla", "tf_Compute",
                   "tf_PjRtCompilerThreadPool", "tf_xla-cpu-codegen")
_NOT_OP_EVENTS = ("end: ", "ThreadpoolListener", "ThunkExecutor", "SlinkyThreadPool")


# Host events that explain where a step's time goes when the device waits (see host-bound).
_SYNC_RE = re.compile(r"^\$(array\.py:\d+ (__float__|__int__|__bool__|__index__|__array__|item|tolist|_value)"
                      r"|api\.py:\d+ (block_until_ready|device_get)|builtins print)$|^np\.asarray\(jax\.Array\)$")
_COMPILE_RE = re.compile(r"^\$pxla\.py:\d+ compile$|^PjRt\w*Client::Compile$")
_TRANSFER_NAMES = ("DevicePut", "H2D Dispatch", "D2H Dispatch")
_COMPILER_LINES = ("tf_PjRtCompilerThreadPool", "tf_xla-cpu-codegen", "tf_xla-gpu", "tf_XLAGpuCompiler")


def _host_category(name: str) -> Optional[str]:
    if _COMPILE_RE.match(name):
        return "compile"
    if _SYNC_RE.match(name):
        return "sync"
    if name.startswith(_TRANSFER_NAMES) or "batched_device_put" in name:
        return "transfer"
    return None


_OP_STATS = frozenset({"hlo_op", "hlo_module", "program_id", "run_id", "device_ordinal"})
# XLA's CPU collectives: the rendezvous of the participants (not ops), and the wait for peers inside it.
_RENDEZVOUS = ("Rendezvous", "Wait for rendezvous callback", "InvokeRendezvous")
_PEER_WAIT = ("Wait: pending_threads",)


def h2d_transfer(event: HostEvent) -> Transfer:
    """A host-side H2D dispatch (CPU backend): the trace records no size for it."""
    return Transfer(kind="H2D", start_ns=event.start_ns, duration_ns=event.duration_ns, bytes=None, device="cpu")


_ALLOC_EVENTS = ("MemoryAllocation", "MemoryDeallocation")
_ALLOC_STATS = frozenset({"allocator_name", "bytes_allocated", "peak_bytes_in_use"})


def host_pass(host, host_events: list[HostEvent], launches: Optional[dict[int, float]] = None):
    """Step marks; compile / sync / transfer events; allocator peaks from memory events;
    on GPU traces (launches given) the host launch time of each CUPTI correlation id."""
    marks = []
    categories: dict[str, Optional[str]] = {}
    alloc: dict[str, list[int]] = {}    # allocator -> [peak allocated, lifetime peak, events]
    for line in host.lines:
        line_name = line.name
        if line_name.startswith("Host Threads") and launches is not None:
            for ev in line.events:
                for key, value in ev.stats:
                    if key == "correlation_id":
                        launches[int(value)] = ev.start_ns
                        break
            continue
        if line_name.startswith(CPU_EXECUTOR_PREFIXES) or line_name.startswith("Host Threads"):
            continue
        step_line = not line_name.startswith(_NOT_STEP_LINES)
        for ev in line.events:
            name = ev.name
            cat = categories.get(name, "?")
            if cat == "?":
                cat = categories[name] = _host_category(name)
            if cat is not None:
                host_events.append(HostEvent(name, ev.start_ns, ev.duration_ns, cat))
                continue
            if name in _ALLOC_EVENTS:
                stats = stat_dict(ev, _ALLOC_STATS)
                entry = alloc.setdefault(str(stats.get("allocator_name", "?")), [0, 0, 0])
                entry[0] = max(entry[0], int(stats.get("bytes_allocated", 0) or 0))
                entry[1] = max(entry[1], int(stats.get("peak_bytes_in_use", 0) or 0))
                entry[2] += 1
                continue
            if not step_line or name.startswith("$"):
                continue
            for key, value in ev.stats:
                if key == "step_num":
                    marks.append((ev.start_ns, ev.start_ns + ev.duration_ns, int(value)))
                    break
    marks.sort()
    allocators = [AllocatorPeak(a, v[0], v[1], v[2]) for a, v in sorted(alloc.items())]
    return marks, allocators


def cpu_op_events(line, host_events: list[HostEvent], waits: list[tuple[float, float, str]]) -> list[tuple]:
    """Op events of one XLA CPU executor thread, each with the device that ran it.

    Every op runs inside a `ThunkExecutor::Execute` span of one program execution on one
    device, so the stats (module, program, run, device ordinal) are read once per span, not
    once per op: on large traces reading every op's stats costs several times the parse.
    The threads serve every simulated device in turn: the `device_ordinal` stat says which.
    Inside a collective, XLA's rendezvous records `Wait: pending_threads=k/N` while the device
    waits for its peers to arrive: those spans go to `waits` as (start, end, device).
    """
    out = []
    append = out.append
    kinds: dict[str, int] = {}      # event name -> 0 op, 1 span start, 2 other, 3 transfer, 4 rendezvous, 5 wait
    span_end, span = -1.0, None     # span: (module_key, run_id, device) of the current Execute span
    here = None
    for ev in line.events:
        name = ev.name
        kind = kinds.get(name)
        if kind is None:
            kind = kinds[name] = (1 if name.startswith("ThunkExecutor::Execute") and not name.endswith(")")
                                  else 2 if name.startswith(_NOT_OP_EVENTS)
                                  else 3 if name.startswith(_TRANSFER_NAMES)
                                  else 5 if name.startswith(_PEER_WAIT)
                                  else 4 if name.startswith(_RENDEZVOUS) else 0)
        if kind == 2 or kind == 4:
            continue
        if kind == 3:
            host_events.append(HostEvent(name, ev.start_ns, ev.duration_ns, "transfer"))
            continue
        start = ev.start_ns
        if kind == 5:
            if here is not None:
                waits.append((start, start + ev.duration_ns, here[2]))
            continue
        if kind == 1:
            span_end, span = start + ev.duration_ns, None
            continue
        if span is None or start >= span_end:
            stats = stat_dict(ev, _OP_STATS)
            if "hlo_op" not in stats:
                continue
            here = (module_key(stats), stats.get("run_id"), f"cpu:{int(stats.get('device_ordinal', 0) or 0)}")
            if start < span_end:
                span = here
        else:
            here = span
        append((start, ev.duration_ns, here[0], name, here[1], here[2]))
    out.sort(key=lambda e: e[0])
    return out
