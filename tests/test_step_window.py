"""`--steps A:B`: a window of a trace's steps, every figure over those steps only, and the report
says which."""

import json

import pytest

from advisor.load.loader import load_timeline
from advisor.locate import find_runs
from conftest import FIXTURES, cli

SYNC = FIXTURES / "corpus" / "sync_every_step"          # 20 annotated steps, the first compiles
GPU = FIXTURES / "gpu_data_parallel"                     # synthetic GPU trace, 3 steps
GPU_H2D = FIXTURES / "gpu_h2d_idle"


def _timeline(run_dir, steps=None):
    (run,) = find_runs(run_dir)
    return load_timeline(run.xplane, steps)


def test_window_keeps_the_steps_asked_and_only_their_ops():
    whole, window = _timeline(SYNC), _timeline(SYNC, slice(3, 6))
    assert [s.number for s in window.steps] == [3, 4, 5]
    assert window.step_window == (3, 5) and window.steps_of_trace == len(whole.steps) == 20
    step = {(o.module, o.name): o.count for o in whole.ops if o.module == whole.step_module}
    inside = {(o.module, o.name): o.count for o in window.ops if o.module == whole.step_module}
    # the step program ran once per step: each of its ops 3 times in 3 steps, 20 in the trace
    assert inside and all(inside[k] * 20 == step[k] * 3 for k in inside)
    lo, hi = window.steps[0].start_ns, window.steps[-1].end_ns
    for ops in window.device_ops.columns().values():
        assert lo <= ops.starts.min() and ops.starts.max() < hi
    assert all(lo <= e.start_ns < hi for e in window.host_events)
    assert window.busy and lo <= window.busy[0][0] and window.busy[-1][1] <= hi


def test_open_window_is_the_whole_trace():
    whole, window = _timeline(SYNC), _timeline(SYNC, slice(None, None))
    assert window.steps == whole.steps and window.ops == whole.ops and window.busy == whole.busy
    assert window.device_ops.columns() == whole.device_ops.columns() and window.host_events == whole.host_events


def test_gpu_window_counts_only_its_kernels_and_copies():
    whole, window = _timeline(GPU), _timeline(GPU, slice(1, 2))
    assert len(whole.steps) == 3 and [s.number for s in window.steps] == [whole.steps[1].number]
    for full, part in zip(whole.devices, window.devices):
        assert full.name == part.name
        if full.kernel_count:
            assert 0 < part.kernel_count < full.kernel_count
            lo, hi = window.steps[0].start_ns, window.steps[0].end_ns
            assert all(lo <= s < hi for s, _ in part.busy)
    copies, one = _timeline(GPU_H2D), _timeline(GPU_H2D, slice(1, 2))     # one host-to-device copy per step
    assert len(copies.transfers) == 3 and len(one.transfers) == 1
    assert one.steps[0].start_ns <= one.transfers[0].start_ns < one.steps[0].end_ns


def test_report_says_which_steps():
    proc = cli("analyze", SYNC, "--steps", "3:6", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    run = json.loads(proc.stdout)["runs"][0]
    assert run["summary"]["steps"] == 3
    assert any("steps 3 to 5 analyzed (3 of the trace's 20 steps" in n for n in run["notes"])
    text = cli("analyze", SYNC, "--steps", "3:6").stdout
    assert "steps 3 to 5 analyzed" in text


@pytest.mark.parametrize("value, says", [("5:2", "with A < B"), ("a:b", "expects step numbers"),
                                         ("1:2:3", "expects step numbers"), ("500:600", "the trace has steps 0 to 19")])
def test_bad_window_is_one_line_and_exit_2(value, says):
    proc = cli("analyze", SYNC, "--steps", value)
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("advisor: error: ") and says in lines[0], proc.stderr


def test_step_numbers_that_repeat_are_refused(tmp_path):
    """A loop that numbers steps per epoch (0, 1, 2, 0, 1, 2): a window of numbers is ambiguous."""
    import jax
    import jax.numpy as jnp

    from advisor.errors import AdvisorError

    step = jax.jit(lambda x: jnp.tanh(x @ x))
    x = step(jnp.ones((64, 64)))
    with jax.profiler.trace(str(tmp_path)):
        for _epoch in range(2):
            for i in range(3):
                with jax.profiler.StepTraceAnnotation("train", step_num=i):
                    x = step(x).block_until_ready()
    assert [s.number for s in _timeline(tmp_path).steps] == [0, 1, 2, 0, 1, 2]
    with pytest.raises(AdvisorError, match="not one stretch of the trace: its step numbers repeat"):
        _timeline(tmp_path, slice(1, 2))


def test_api_takes_only_a_slice_of_step_numbers():
    from advisor.errors import AdvisorError
    from advisor.settings import parse_steps_flag

    assert parse_steps_flag("3:6") == slice(3, 6) and parse_steps_flag("4") == slice(4, 5)
    assert parse_steps_flag(":6") == slice(None, 6) and parse_steps_flag(slice(2, None)) == slice(2, None)
    for bad in (slice(0, 10, 2), slice(5, 2), slice("a", "b")):
        with pytest.raises(AdvisorError, match="expects a slice of step numbers"):
            parse_steps_flag(bad, "steps")


def test_every_host_of_a_run_takes_the_same_window():
    from advisor.load.loader import load_run

    (run,) = find_runs(FIXTURES / "parallel" / "two_hosts")
    whole = load_run(run)
    numbers = [s.number for s in whole.hosts[0].steps]
    assert len(whole.hosts) == 2 and len(numbers) >= 2
    window = load_run(run, slice(numbers[1], numbers[1] + 1))
    assert [[s.number for s in h.steps] for h in window.hosts] == [[numbers[1]], [numbers[1]]]
    assert any("as --steps asked" in n for n in window.notes)


def test_gpu_window_takes_allocator_peaks_over_its_memory_events():
    from jax.profiler import ProfileData

    one = _timeline(GPU, slice(1, 2))
    lo, hi = one.steps[0].start_ns, one.steps[0].end_ns
    (run,) = find_runs(GPU)
    expected: dict[str, list[int]] = {}
    for line in ProfileData.from_file(str(run.xplane)).find_plane_with_name("/host:CPU").lines:
        for ev in line.events:
            if ev.name in ("MemoryAllocation", "MemoryDeallocation") and lo <= ev.start_ns < hi:
                stats = dict(ev.stats)
                entry = expected.setdefault(stats["allocator_name"], [0, 0, 0])
                entry[0] = max(entry[0], int(stats["bytes_allocated"]))
                entry[1] = max(entry[1], int(stats["peak_bytes_in_use"]))
                entry[2] += 1
    assert expected and all(v[2] < 6 for v in expected.values())      # the trace has 6 per allocator
    assert {a.allocator: [a.peak_bytes, a.lifetime_peak_bytes, a.events] for a in one.allocators} == expected
