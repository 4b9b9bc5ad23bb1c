"""Derived views of a loaded run, between `load/` and the rules and renderers.

Every derived number is a view: `views.<name>.of(profile)`, computed once per run from the `Profile`
and the settings the job bound to it (`bound.py`), never from files, and kept on the profile. Each
is a frozen dataclass with `to_json()` and `notes` (what the run's notes say about it: the job adds
them, a view never writes to the profile). `ALL` lists them once, in dependency order (a view reads
only those before it); the job computes them in that order, and the result document holds the
`to_json()` of those named in `IN_DOCUMENT`. docs/architecture.md says where a new one goes.
"""
from . import (
    activations,
    activity,
    efficiency,
    idle,
    kernels,
    layers,
    memory,
    op_table,
    ops,
    parallelism,
    peak,
    recording,
    step_time,
    summary,
)

ALL = (
    activity,       # each device per step: compute, collectives, waits, idle, exposed, top ops, the slowest
    kernels,        # each accelerator's small kernels
    idle,           # the device's idle time in the steps (host-bound, the verdict, compare)
    step_time,      # each step's time, their median, op time by category
    memory,         # peak memory, where the figure comes from, what is live there
    ops,            # each op's time, FLOPs, bytes
    peak,           # the peaks every utilization divides by
    parallelism,    # the mesh, each collective's axis and role, pipeline, train state
    activations,    # activations live at the peak, input shapes, weight dims, training, bfloat16
    layers,         # layers of different shapes, layer-stacking copies
    op_table,       # each op per step under a key that matches it across programs
    efficiency,     # FLOPs, MFU, HFU, roofline bounds, the verdict (with basis)
    recording,      # how the run was recorded (versions, XLA_FLAGS, command buffers)
    summary,        # runs[].summary: what --format json prints for the run
)

# The views whose to_json() the result document holds beside the run's JSON (Analysis.document()["views"]):
# what the other reports draw and a baseline records.
IN_DOCUMENT = (step_time, memory, op_table)


def name(view) -> str:
    """A view module's name (`step_time`), its key in the result document."""
    return view.__name__.rsplit(".", 1)[-1]
