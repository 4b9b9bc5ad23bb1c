"""Ops added chunk by chunk, kept in blocks that go to disk past a budget: the same self times,
totals and columns as a line read whole, whatever the chunking, order or budget."""

import numpy as np
import pytest

from advisor.load import op_accumulator as ops_module
from advisor.load.columns import self_times
from advisor.load.op_accumulator import OpAccumulator
from advisor.load.op_store import OpStore


def _nested_line(rng, n):
    """n events of one thread, sorted by start: a stack of open events, children inside parents,
    some ending at their parent's end or at the same start as it."""
    starts, ends, stack, t = [], [], [], 0.0
    while len(starts) < n:
        while stack and (rng.random() < 0.4 or t >= stack[-1]):
            t = max(t, stack.pop())
        start = t + float(rng.integers(0, 3))
        limit = stack[-1] if stack else start + 1000.0
        if start >= limit:
            t = limit
            continue
        end = min(limit, start + float(rng.integers(0, 400)))
        starts.append(start)
        ends.append(end)
        if end > start and rng.random() < 0.5:
            stack.append(end)
            t = start
        else:
            t = end
    return np.array(starts), np.array(ends)


def _accumulate(starts, ends, cuts, budget, places=None, ids=None):
    acc = OpAccumulator(OpStore(budget=budget))
    acc.place_id("m(1)", 0, "cpu:0")
    acc.place_id("m(1)", 1, "cpu:1")
    ids = np.arange(len(starts)) if ids is None else ids      # an event's name follows it when reordered
    names = np.array([acc.name_id(f"op{i % 7}") for i in ids.tolist()], dtype=np.int64)
    places = np.zeros(len(starts), dtype=np.int64) if places is None else places
    line = acc.line()
    for lo, hi in zip([0, *cuts], [*cuts, len(starts)]):
        line.add(starts[lo:hi], ends[lo:hi] - starts[lo:hi], places[lo:hi], names[lo:hi])
    line.close()
    return acc


def _own(acc):
    return np.concatenate([c[2] for _, c in acc.store.columns()])


@pytest.mark.parametrize("seed", range(12))
def test_chunked_line_gives_the_self_times_of_the_whole_line(seed, monkeypatch):
    monkeypatch.setattr(ops_module, "BLOCK_OPS", 64)
    rng = np.random.default_rng(seed)
    starts, ends = _nested_line(rng, 3000)
    places = rng.integers(0, 2, len(starts))
    whole = _accumulate(starts, ends, [], budget=1 << 30, places=places)
    cuts = sorted(set(rng.integers(1, len(starts), 40).tolist()))
    chunked = _accumulate(starts, ends, cuts, budget=0, places=places)
    assert np.allclose(_own(whole), self_times(starts, ends))
    assert np.allclose(_own(chunked), _own(whole))
    assert chunked.stats() == whole.stats() and chunked.runs == whole.runs
    assert chunked.device_ops.columns() == whole.device_ops.columns()
    assert chunked.store.spilled_bytes > 0 and len(chunked.store.blocks) > 1


def test_a_line_out_of_order_across_chunks_is_read_whole_and_sorted(monkeypatch):
    monkeypatch.setattr(ops_module, "BLOCK_OPS", 64)
    starts, ends = _nested_line(np.random.default_rng(7), 2000)
    order = np.r_[1000:2000, 0:1000]               # the second half of the line comes first
    chunked = _accumulate(starts[order], ends[order], list(range(100, 2000, 100)), budget=0, ids=order)
    whole = _accumulate(starts, ends, [], budget=1 << 30)
    assert np.allclose(_own(chunked), self_times(starts, ends))
    assert chunked.stats() == whole.stats()
    assert chunked.device_ops.columns() == whole.device_ops.columns()


def test_store_reads_spilled_blocks_back_and_windows_them():
    store = OpStore(budget=0)
    starts = np.arange(10.0)
    store.add((starts, starts + 0.5, np.full(10, 0.5), np.arange(10), np.zeros(10, dtype=np.int64)), "", 1)
    store.add((starts + 10, starts + 10.5, np.full(10, 0.5), np.arange(10), np.ones(10, dtype=np.int64)), "", 2)
    assert store.spilled_bytes == 20 * 40 and all(b.data is None for b in store.blocks)
    (_, got), = list(store.columns((3.0, 7.0)))
    assert got[0].tolist() == [3.0, 4.0, 5.0, 6.0] and got[3].tolist() == [3, 4, 5, 6]
    (line2,) = store.take_line(2)
    assert line2[0].tolist() == (starts + 10).tolist() and len(store.blocks) == 1
    store.close()


def test_device_activity_without_steps_spans_the_earliest_to_the_latest_op(monkeypatch):
    """Two executor threads feed cpu:0; the thread read first starts later. Without steps the
    window is the earliest start to the latest end, whatever the order the lines were read in,
    and slices of 10 ops give what one slice gives."""
    from advisor.load import device_totals as devices
    from advisor.model import Host, Profile
    from advisor.views import activity

    acc = OpAccumulator()
    place = acc.place_id("m(1)", 0, "cpu:0")
    for first in (100.0, 0.0):            # the later thread first
        line = acc.line()
        starts = first + 10.0 * np.arange(40)
        line.add(starts, np.full(40, 5.0), np.full(40, place), np.full(40, acc.name_id("fusion.1")))
        line.close()
    (whole,) = devices.device_totals("h", acc.device_ops, [], {}, None, [])
    assert whole.window_ns == 495.0          # from 0 to the later thread's last end, 100 + 390 + 5
    assert whole.busy_ns == pytest.approx(5.0 * 50) and whole.collective_ns == 0   # 40 + 10 distinct ops of 5 ns
    profile = Profile(path="", backend="cpu", device_name="", steps=[], ops=[], modules={}, step_module=None,
                      memory=None, device_memory_profile=[], run_metadata={}, hosts=[Host("h", "", [], [whole])])
    (per_step,) = activity.of(profile).devices
    assert per_step.step_ns == 495.0 and per_step.compute_ns == pytest.approx(5.0 * 50) and per_step.steps == 0
    monkeypatch.setattr(devices, "SLICE_OPS", 10)
    (sliced,) = devices.device_totals("h", acc.device_ops, [], {}, None, [])
    assert sliced == whole


def test_an_op_open_over_the_whole_line_holds_back_a_bounded_number(monkeypatch):
    """A loop op spanning the line (a scan over every step): the ops inside it are released
    before it closes, at most HOLD_OPS held, in blocks of at most BLOCK_OPS, self times exact."""
    monkeypatch.setattr(ops_module, "BLOCK_OPS", 64)
    monkeypatch.setattr(ops_module, "HOLD_OPS", 100)
    starts, ends = _nested_line(np.random.default_rng(3), 3000)
    starts, ends = np.r_[starts[0], starts], np.r_[ends.max() + 1, ends]     # the loop op, first
    acc = OpAccumulator(OpStore(budget=0))
    acc.place_id("m(1)", 0, "cpu:0")
    names = np.zeros(len(starts), dtype=np.int64) + acc.name_id("op")
    line, most = acc.line(), 0
    for lo in range(0, len(starts), 37):
        hi = lo + 37
        line.add(starts[lo:hi], ends[lo:hi] - starts[lo:hi], np.zeros(len(starts[lo:hi]), dtype=np.int64), names[lo:hi])
        most = max(most, sum(len(h[1]) for h in line.held))
    line.close()
    assert most <= 100 + 37
    assert max(b.n for b in acc.store.blocks) <= 64
    got = [c for _, c in acc.store.columns()]
    s, e, o = (np.concatenate([c[k] for c in got]) for k in range(3))
    ref = self_times(starts, ends)
    mine, theirs = np.lexsort((o, e, s)), np.lexsort((ref, ends, starts))     # the same (start, end, own) triples
    assert np.array_equal(s[mine], starts[theirs]) and np.array_equal(e[mine], ends[theirs])
    assert np.allclose(o[mine], ref[theirs])


def test_waits_go_to_the_latest_collective_around_them_however_the_slices_fall(monkeypatch):
    """Two all-reduces overlap on one device, A [0, 100) and B [10, 20); a wait at [50, 60) is
    inside A only. Slices of 1 op give what one slice gives."""
    from advisor.load import device_totals as devices

    acc = OpAccumulator()
    place = acc.place_id("m(1)", 0, "cpu:0")
    for start, end, name in ((0.0, 100.0, "ncclAllReduceA"), (10.0, 20.0, "ncclAllReduceB"), (30.0, 40.0, "fusion")):
        line = acc.line()
        line.add(np.array([start]), np.array([end - start]), np.array([place]), np.array([acc.name_id(name)]))
        line.close()
    acc.add_waits(np.array([50.0]), np.array([10.0]), np.array([place]))
    (whole,) = devices.device_totals("h", acc.device_ops, [], {}, None, [])
    assert whole.collective_wait == {"ncclAllReduceA": 10.0} and whole.wait_ns == 10.0
    monkeypatch.setattr(devices, "SLICE_OPS", 1)
    monkeypatch.setattr(devices, "_SAMPLE_EVERY", 1)
    (sliced,) = devices.device_totals("h", acc.device_ops, [], {}, None, [])
    assert sliced == whole
