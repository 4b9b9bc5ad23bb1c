"""The bundled Transformer's `parallel.tensor.mode=async` (Part 4.2's collective-permute rings) and its
data x pipe x tensor mesh (Part 5), on 8 simulated CPU devices: one child process computes the
losses of each layout and records two traces (tests/parallel_tensor_runs.py); the traces are
analyzed here."""

import dataclasses
import json
import os
import subprocess
import sys

import pytest

from advisor import workloads
from advisor.engine import analyze_all
from advisor.views import parallelism
from advisor.workloads.config import ConfigError
from conftest import ROOT, TEST_XLA_FLAGS


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    out = tmp_path_factory.mktemp("tensor")
    env = {**os.environ, "JAX_PLATFORMS": "cpu",
           "XLA_FLAGS": f"--xla_force_host_platform_device_count=8 {TEST_XLA_FLAGS}",
           "PYTHONPATH": str(ROOT / "tests")}
    proc = subprocess.run([sys.executable, str(ROOT / "tests" / "parallel_tensor_runs.py"), str(out)],
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["devices"] == 8
    views = {}
    for name, folder in result["runs"].items():
        analyses, failed = analyze_all(folder)
        assert not failed and len(analyses) == 1
        views[name] = analyses[0]
    return result, views


def state_on_paper(tensor: int, pipe: int = 1) -> int:
    """Parameters + Adam's two moments per device, in bytes: the split leaves (parallel.TENSOR_DIMS) hold
    1/tensor, the blocks 1/pipe, the rest is whole (the model's shapes, from one device's build)."""
    import jax
    import numpy as np

    from advisor.workloads.parallel import tensor_dim
    from parallel_tensor_runs import BASE

    config = workloads.resolve("transformer", "tiny", BASE)
    params = jax.eval_shape(workloads.get("transformer").build(config).init_state).params
    sizes = jax.tree_util.tree_leaves(jax.tree_util.tree_map_with_path(
        lambda path, x: np.prod(x.shape) / (tensor if tensor_dim(path, x.ndim) is not None else 1)
        / (pipe if any(getattr(k, "key", None) == "block" for k in path) else 1), params))
    return int(sum(sizes)) * 3 * 4


@pytest.mark.slow
def test_async_and_3d_compute_the_same_model_as_sync(runs):
    result, _ = runs
    sync = result["losses"]["sync"]
    for name in ("async", "3d", "3d_async"):
        # step 0 (the forward), and the mean over 3 steps (the third after a non-zero learning rate: the
        # gradients summed over the tensor axis and the rings' transposes)
        assert result["losses"][name] == pytest.approx(sync, rel=1e-5), name
    assert result["permutes"]["sync"] == 0 and result["permutes"]["async"] > 0
    assert result["permutes"]["3d_async"] > result["permutes"]["3d"] > 0


@pytest.mark.slow
def test_async_rings_are_tensor_parallel_and_their_overlap_is_not_invented_on_cpu(runs):
    _, views = runs
    analysis = views["async"]
    v = parallelism.of(analysis.profile)
    assert [(a.name, a.size) for a in v.axes] == [("data", 2), ("tensor", 4)]
    # the layer scan holds the rings: no pipeline is read into it
    assert v.pipeline is None
    rings = [r for r in v.collectives if r.kind == "collective-permute"]
    assert rings and all(r.axis == "tensor" and r.role == "tensor-parallel" for r in rings)
    assert any("blocking rendezvous" in n and "cannot be measured" in n for n in v.remarks)
    assert not any(f.rule == "pipeline-bubble" for f in analysis.findings)
    # params + Adam per device: the blocks' split leaves over tensor, the rest whole; all copied over data
    assert v.state.split_over == ["tensor"] and v.state.replicated_over == ["data"]


@pytest.mark.slow
def test_spmd_tensor_parallel_state_is_split_over_tensor_and_copied_over_data(runs):
    """XLA's SPMD partitioner all-reduces the gradients of split and whole leaves together over every
    device; the state's own shardings say which devices hold each leaf's copy."""
    _, views = runs
    for name in ("sync", "async"):
        state = parallelism.of(views[name].profile).state
        assert state.split_over == ["tensor"] and state.replicated_over == ["data"], name
        paper = state_on_paper(tensor=4)
        assert state.bytes_per_device == pytest.approx(paper, rel=0.01), name
        assert state.fsdp_saving_bytes == pytest.approx(paper / 2, rel=0.01), name
    state = parallelism.of(views["3d_async"].profile).state
    assert state.bytes_per_device == pytest.approx(state_on_paper(tensor=2, pipe=2), rel=0.01)


@pytest.mark.slow
def test_3d_mesh_roles_and_bubble(runs):
    _, views = runs
    analysis = views["3d_async"]
    v = parallelism.of(analysis.profile)
    assert [(a.name, a.size) for a in v.axes] == [("data", 2), ("pipe", 2), ("tensor", 2)]
    roles = {(r.axis, r.kind, r.role) for r in v.collectives}
    assert ("pipe", "collective-permute", "pipeline-transfer") in roles
    assert ("tensor", "collective-permute", "tensor-parallel") in roles
    assert ("data", "all-reduce", "gradient-sync") in roles
    assert not any(r.role == "pipeline-transfer" and r.axis != "pipe" for r in v.collectives)
    p = v.pipeline
    assert (p.stages, p.microbatches, p.iterations, p.axis) == (2, 2, 3, "pipe")
    assert p.bubble_fraction == pytest.approx(1 / 3)
    assert sorted(v.state.split_over) == ["pipe", "tensor"] and v.state.replicated_over == ["data"]


def test_tensor_mode_is_checked():
    config = workloads.resolve("transformer", "tiny", ["parallel.tensor=2", "parallel.tensor.mode=async"])
    assert config["parallel"]["tensor.mode"] == "async"
    with pytest.raises(ConfigError, match="tensor.mode"):
        workloads.resolve("transformer", "tiny", ["parallel.tensor.mode=ring"])
    with pytest.raises(ConfigError, match="fsdp=false"):
        workloads.resolve("transformer", "tiny", ["parallel.data=2", "parallel.tensor=2", "parallel.tensor.mode=async",
                                                  "parallel.fsdp=true"])
    both = workloads.resolve("transformer", "tiny", ["parallel.tensor=2", "parallel.pipeline.stages=2"])
    from advisor.workloads import parallel
    assert parallel.devices_needed(both) == 4


@pytest.mark.slow
def test_rings_in_a_layer_scan_are_no_pipeline_whatever_the_axes_are_called(runs):
    """Without the recorded names (a user's own mesh, named anyhow), a loop holding several rings over
    one axis is a layer scan of tensor-parallel blocks; the pipeline's loop passes one ring per iteration."""
    _, views = runs
    for name, given, pipe, tensor in (("async", [("rows", 2), ("cols", 4)], None, "cols"),
                                      ("3d_async", [("x", 2), ("y", 2), ("z", 2)], "y", "z"),
                                      ("async", None, None, "tensor"),                 # inferred
                                      ("3d_async", None, "pipe", "tensor")):
        profile = views[name].profile
        if given is None:
            profile = dataclasses.replace(profile, run_metadata={k: v for k, v in profile.run_metadata.items()
                                                                 if k != "mesh"})
        v = parallelism.build(profile, mesh=given)
        assert (v.pipeline.axis, v.pipeline.stages, v.pipeline.microbatches) == (pipe, 2, 2) if pipe else \
            v.pipeline is None, (name, given)
        permutes = {(r.axis, r.role) for r in v.collectives if r.kind == "collective-permute"}
        assert permutes == {(tensor, "tensor-parallel")} | ({(pipe, "pipeline-transfer")} if pipe else set())
        # the all-reduces over the ring axis (norm statistics, the whole leaves' gradient shares) are
        # tensor-parallel, and the axis is no data axis: its activation collectives are not resharding
        assert {r.role for r in v.collectives if r.axis == tensor} == {"tensor-parallel"}, (name, given)
        assert v.state.replicated_over == [v.axes[0].name] and v.state.data_axis == v.axes[0].name
