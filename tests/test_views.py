"""The views' one shape (a frozen dataclass with to_json() and the notes it returns, listed once in
dependency order) and the facts they are computed from (the loader's totals, never a mean)."""

import copy
import dataclasses
import json

import pytest

from advisor import views
from advisor.model import KERNEL_BUCKETS_NS
from advisor.views import activity, kernels


@pytest.mark.parametrize("name", ["parallel/two_hosts", "gpu_data_parallel", "transformer_scan"])
def test_every_view_is_one_shape_and_never_writes_to_the_profile(loaded_profile, name):
    profile = copy.deepcopy(loaded_profile(name)[0].profile)
    profile.views = {k: v for k, v in profile.views.items() if k == "settings"}     # computed again, in order
    notes = list(profile.notes)
    returned = []
    for view in views.ALL:
        got = view.of(profile)
        if got is None:         # idle without steps, parallelism on one device
            continue
        assert dataclasses.is_dataclass(got) and type(got).__dataclass_params__.frozen, views.name(view)
        assert isinstance(got.notes, tuple), views.name(view)
        json.dumps(got.to_json())
        returned.extend(got.notes)
    assert profile.notes == notes       # a view returns its notes; the job adds them
    assert [views.name(v) for v in views.IN_DOCUMENT] == ["step_time", "memory", "op_table"]
    if name == "parallel/two_hosts":    # gloo: no wait events, the waits estimated and the view says so
        assert any("no wait-for-peers events" in n for n in returned)
        assert any("no wait-for-peers events" in n for n in loaded_profile(name)[0].profile.notes)


def test_views_are_listed_after_the_views_they_read():
    import ast
    import inspect

    names = [views.name(v) for v in views.ALL]
    for i, view in enumerate(views.ALL):
        tree = ast.parse(inspect.getsource(view))
        read = {a.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.level == 1
                and node.module is None for a in node.names}
        read |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.level == 1
                 and node.module in names}
        assert read & set(names) <= set(names[:i]), (names[i], read & set(names) - set(names[:i]))


def test_the_activity_view_divides_the_loaders_totals_by_the_steps(loaded_profile):
    profile = loaded_profile("parallel/straggler")[0].profile
    view = activity.of(profile)
    assert [d.name for d in view.devices] == [d.name for d in profile.device_totals]
    for totals, d in zip(profile.device_totals, view.devices):
        steps = max(1, totals.steps)
        assert d.step_ns == totals.window_ns / steps
        assert d.compute_ns + d.transfer_ns + d.wait_ns + d.idle_ns == pytest.approx(d.step_ns, rel=1e-6)
        assert len(d.top_ops) == min(activity.TOP_OPS, len(totals.op_ns))     # the loader keeps every op
        assert list(d.top_ops.values()) == sorted(d.top_ops.values(), reverse=True)
    assert view.slowest is max(view.devices, key=lambda d: d.compute_ns)


def test_small_kernels_come_from_the_loaders_duration_buckets(loaded_profile):
    profile = loaded_profile("gpu-traces/tf_bert_v100_multiworker")[0].profile
    active = profile.active_devices
    assert active
    for d in active:
        assert len(d.kernel_counts) == len(KERNEL_BUCKETS_NS) + 1 and sum(d.kernel_counts) == d.kernel_count
        assert sum(d.kernel_bucket_ns) == pytest.approx(d.kernel_ns)
        small = kernels.of(profile).of_device(d.name)
        edge = KERNEL_BUCKETS_NS.index(kernels.SMALL_KERNEL_NS)
        assert small.count == sum(d.kernel_counts[:edge + 1]) and small.count <= d.kernel_count
        larger = kernels.small_kernels(d, 100_000.0)
        assert larger.count >= small.count and larger.ns >= small.ns
    with pytest.raises(ValueError):
        kernels.small_kernels(active[0], 12_345.0)     # a threshold the buckets cannot answer


def test_the_small_kernel_threshold_is_a_bound_setting(loaded_profile):
    """The view reads the threshold from the settings bound to the run, not a constant of its own."""
    import copy

    from advisor.settings import Settings, bind

    profile = copy.deepcopy(loaded_profile("gpu-traces/tf_bert_v100_multiworker")[0].profile)
    device = profile.active_devices[0]
    bind(profile, Settings(small_kernel_ns=100_000.0))
    view = kernels.of(profile)
    assert view.threshold_ns == 100_000.0
    assert view.of_device(device.name) == kernels.small_kernels(device, 100_000.0)
    bind(profile, Settings())
    assert kernels.of(profile).threshold_ns == kernels.SMALL_KERNEL_NS
