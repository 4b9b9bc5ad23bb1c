"""Steps from step annotations, or from the step program's executions."""

from __future__ import annotations

import numpy as np

from ..model import Step


def _steps_from_runs(runs: list[tuple[float, float]]) -> list[Step]:
    """Without step annotations: one step per execution of the step program (CPU backend,
    where executions carry run ids), each lasting until the next one starts."""
    steps = []
    for i, (start, end) in enumerate(runs):
        stop = max(end, runs[i + 1][0]) if i + 1 < len(runs) else end
        steps.append(Step(number=i, start_ns=start, end_ns=stop, annotated=False))
    return steps


def steps_from(marks, last_end_after, runs: list[tuple[float, float]]) -> list[Step]:
    """Steps from `StepTraceAnnotation` events, as a sequence of back-to-back periods.

    When the step program ran once per annotated step, step i ends at the latest of: its
    execution's end (dispatch is asynchronous, so a step's ops may run after the next
    annotation began), its annotation's end, and the next annotation's start (host time
    between steps belongs to the step before). Otherwise each step is extended to the end
    of the ops that started inside it (last_end_after(times) gives, for each of the sorted
    times, the latest end of the ops that start from it to the next).
    """
    if not marks:
        return _steps_from_runs(runs)
    if len(runs) == len(marks):
        steps, begin = [], marks[0][0]
        for i, ((_, mark_end, num), (_, run_end)) in enumerate(zip(marks, runs)):
            end = max(run_end, mark_end, marks[i + 1][0] if i + 1 < len(marks) else run_end, begin)
            steps.append(Step(number=num, start_ns=begin, end_ns=end))
            begin = end
        return steps
    last_ends = last_end_after(np.array([start for start, _, _ in marks], dtype=np.float64))
    return [Step(number=num, start_ns=start, end_ns=max(end, float(last)))
            for (start, end, num), last in zip(marks, last_ends.tolist())]


def device_timed(steps: list[Step], marks, launched: np.ndarray, first: np.ndarray, last: np.ndarray) -> list[Step]:
    """GPU steps timed by the device work their annotations launched, when an annotation ends before
    that work does (the loop does not block in its steps, as the tutorial's profiling cell is
    written): step i runs from its first launched kernel to the next step's first, the last one to
    its last kernel's end. `launched`, `first`, `last`: each launch's host time, and its kernels'
    first start and last end. Otherwise (each step blocks on its work) the steps as they are."""
    if not steps or len(marks) != len(steps) or not len(launched):
        return steps
    spans = []
    for start, end, _ in marks:
        mine = (launched >= start) & (launched <= end)
        if not mine.any():
            return steps
        spans.append((float(first[mine].min()), float(last[mine].max()), end))
    if not any(work_end > mark_end for _, work_end, mark_end in spans):
        return steps
    out = []
    for i, (step, (begin, work_end, _)) in enumerate(zip(steps, spans)):
        end = spans[i + 1][0] if i + 1 < len(spans) else work_end
        out.append(Step(number=step.number, start_ns=begin, end_ns=max(end, begin), annotated=True,
                        device_timed=True))
    return out
