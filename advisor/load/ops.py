"""Op self times per (device, module, op) and program executions, from sorted op events."""

from __future__ import annotations

from typing import Optional

from ..model import OpStat

NO_MODULE = "(no module)"     # device events that no XLA program launched (e.g. TensorFlow kernels)


def stat_dict(event, wanted: frozenset) -> dict:
    if hasattr(event, "stat_dict"):   # the streaming reader reads only the wanted values
        return event.stat_dict(wanted)
    return {k: v for k, v in event.stats if k in wanted}


def module_key(stats: dict) -> str:
    return f"{stats.get('hlo_module', '?')}({stats.get('program_id', -1)})"


class OpAccumulator:
    def __init__(self):
        self.by_key: dict[tuple[str, str], list] = {}
        self.intervals: list[tuple[float, float]] = []
        self.runs: dict[tuple[str, int], list[float]] = {}   # (module, run_id) -> [start, end]
        self.device_busy: list[tuple[float, float]] = []      # GPU/TPU: kernel intervals
        # device -> (start, end, module, op) of every op it ran, and (start, end) of its waits for peers
        self.device_ops: dict[str, list[tuple[float, float, str, str]]] = {}
        self.device_waits: dict[str, list[tuple[float, float]]] = {}

    def add_line(self, events: list[tuple], device: str = "") -> None:
        """events: (start, duration, module_key, op, run_id or None, device) on one line, sorted by
        start; `device` is the device that ran the op (the CPU executor threads serve them all)."""
        stack: list[tuple[float, int]] = []   # (end, index) of the enclosing ops
        self_ns = [0.0] * len(events)
        runs, intervals = self.runs, self.intervals
        last_run, span = None, None
        device_ops = self.device_ops
        for idx, (start, dur, module, op, run_id, dev) in enumerate(events):
            end = start + dur
            ops_of = device_ops.get(dev)
            if ops_of is None:
                ops_of = device_ops[dev] = []
            ops_of.append((start, end, module, op))
            if run_id is not None:
                if (module, run_id) != last_run:
                    last_run = (module, run_id)
                    span = runs.setdefault(last_run, [start, end])
                if start < span[0]:
                    span[0] = start
                if end > span[1]:
                    span[1] = end
            while stack and stack[-1][0] <= start:
                stack.pop()
            if stack:
                self_ns[stack[-1][1]] -= dur
            self_ns[idx] += dur
            stack.append((end, idx))
            intervals.append((start, end))
        by_key = self.by_key
        for idx, (_, _, module, op, _, _) in enumerate(events):
            entry = by_key.get((device, module, op))
            if entry is None:
                entry = by_key[(device, module, op)] = [0.0, 0]
            entry[0] += self_ns[idx] if self_ns[idx] > 0 else 0.0
            entry[1] += 1

    def busy_spans(self) -> list[tuple[float, float]]:
        """When the device was executing: program executions on CPU, op intervals on devices."""
        if self.device_busy:
            return list(self.device_busy)
        return [tuple(span) for span in self.runs.values()] if self.runs else list(self.intervals)

    def step_module(self) -> Optional[str]:
        """The program with the most op time: the training step in a training trace."""
        totals: dict[str, float] = {}
        for (_, module, _), (self_ns, _) in self.by_key.items():
            if module != NO_MODULE:
                totals[module] = totals.get(module, 0.0) + self_ns
        return max(totals, key=totals.get) if totals else None

    def step_runs(self) -> list[tuple[float, float]]:
        """Executions (start, end) of the step program, in order."""
        top = self.step_module()
        return sorted(tuple(span) for (module, _), span in self.runs.items() if module == top)

    def stats(self) -> list[OpStat]:
        return [OpStat(module=m, name=o, self_ns=v[0], count=v[1], device=d) for (d, m, o), v in self.by_key.items()]
