"""The parallelism view on the corpus programs in the style of the tutorial's Parts 3-5, recorded on
8 simulated CPU devices (tests/corpus/, fixtures/corpus/): the mesh, collectives by axis and role,
the pipeline's bubble against the count on paper, the state per axis, memory by kind; and the
rule fixes it carries (weights are not activations, per-device DUS time, schedule-loop advice,
role-aware communication advice, partly replicated state)."""

import pytest

from advisor.engine import analyze_all
from advisor.model import Instruction
from advisor.views import activity, parallelism
from advisor.views.parallelism.mesh import Axis, infer_axes
from advisor.views.parallelism.weights import weight_like
from corpus.traces import materialize

MIB = 2 ** 20


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    cache = {}

    def get(case):
        if case not in cache:
            analyses, failed = analyze_all(materialize(case, tmp_path_factory.mktemp("par")))
            assert not failed and len(analyses) == 1
            cache[case] = analyses[0]
        return cache[case]
    return get


def view(run, case):
    return parallelism.of(run(case).profile)


def mesh(v):
    return [(a.name, a.size) for a in v.axes]


def rows(v, role=None, axis=None):
    return [r for r in v.collectives if (role is None or r.role == role) and (axis is None or r.axis == axis)]


@pytest.mark.parametrize("case, stages, micro, loops, iterations, bubble", [
    ("pipeline_gpipe_m2", 4, 2, 1, 5, 3 / 5),
    ("pipeline_gpipe_m16", 4, 16, 1, 19, 3 / 19),
    ("pipeline_looping", 4, 4, 2, 11, 3 / 11),
    ("parallel_3d", 2, 4, 1, 5, 1 / 5),
    ("parallel_3d_fsdp", 2, 4, 1, 5, 1 / 5),
])
def test_bubble_equals_the_count_on_paper(run, case, stages, micro, loops, iterations, bubble):
    p = view(run, case).pipeline
    assert (p.stages, p.microbatches, p.loops, p.iterations) == (stages, micro, loops, iterations)
    assert p.padding_iterations == stages - 1 and p.axis == "pipe"
    assert p.bubble_fraction == pytest.approx(bubble)


@pytest.mark.parametrize("case, axes", [
    ("pipeline_gpipe_m2", [("data", 2), ("pipe", 4)]),
    ("pipeline_looping", [("data", 2), ("pipe", 4)]),
    ("tensor_parallel_sync", [("data", 2), ("tensor", 4)]),
    ("tensor_parallel_async", [("data", 2), ("tensor", 4)]),
    ("parallel_3d", [("data", 2), ("pipe", 2), ("tensor", 2)]),
    ("parallel_3d_fsdp", [("data", 2), ("pipe", 2), ("tensor", 2)]),
])
def test_mesh_inferred_and_named_by_role(run, case, axes):
    v = view(run, case)
    assert mesh(v) == axes and v.mesh_source == "inferred"


def test_no_pipeline_without_a_schedule_loop(run):
    for case in ("tensor_parallel_sync", "tensor_parallel_async"):
        assert view(run, case).pipeline is None


def test_pipeline_collectives_carry_axis_and_role(run):
    v = view(run, "pipeline_gpipe_m2")
    (transfer,) = rows(v, "pipeline-transfer")
    assert transfer.axis == "pipe" and transfer.axis_size == 4 and transfer.kind == "collective-permute"
    assert transfer.count_per_step == pytest.approx(10)     # 5 forward + 5 backward iterations
    (grad,) = rows(v, "gradient-sync")
    assert grad.axis == "data" and grad.kind == "all-reduce"
    # the two [1, 256, 256] weight gradients, 2 x (n-1)/n of them through each device over 2 devices
    assert grad.bytes_per_step == pytest.approx(2 * 256 * 256 * 4, rel=0.01)
    assert not rows(v, "tensor-parallel")


def test_tensor_parallel_collectives(run):
    sync = view(run, "tensor_parallel_sync")
    kinds = {r.kind for r in rows(sync, "tensor-parallel", "tensor")}
    assert kinds == {"all-gather", "reduce-scatter"}
    assert rows(sync, "gradient-sync", "data")
    ring = view(run, "tensor_parallel_async")
    (permutes,) = rows(ring, "tensor-parallel", "tensor")
    assert permutes.kind == "collective-permute" and permutes.axis_size == 4
    # 4 blocks x 2 rings x 3 hops forward, and their transposes backward (XLA may fuse a few away)
    assert permutes.count_per_step >= 40
    assert any("cannot be measured" in n for n in ring.remarks)
    assert not any("cannot be measured" in n for n in sync.remarks)


def test_3d_fsdp_roles_over_data(run):
    v = view(run, "parallel_3d_fsdp")
    assert {r.kind for r in rows(v, "fsdp-gather", "data")} == {"all-gather"}
    assert {r.kind for r in rows(v, "fsdp-scatter", "data")} == {"reduce-scatter"}
    assert not rows(v, "gradient-sync")
    assert rows(v, "pipeline-transfer", "pipe") and rows(v, "tensor-parallel", "tensor")


def test_state_per_axis_and_fsdp_saving(run):
    s = view(run, "parallel_3d").state
    assert s.split_over == ["pipe", "tensor"] and s.replicated_over == ["data"]
    # 2 stages' blocks of 512 x 2048 (w1) and 2048 x 512 (w2) split over tensor=2: 8 MiB of
    # parameters per device, Adam's two moments 16 MiB more
    params_and_adam = 3 * 2 * 2 * 512 * 1024 * 4
    assert s.bytes_per_device == pytest.approx(params_and_adam, rel=0.01)
    assert s.fsdp_saving_bytes == pytest.approx(params_and_adam * (1 - 1 / 2), rel=0.2)
    fsdp = view(run, "parallel_3d_fsdp").state
    assert fsdp.split_over == ["data", "pipe", "tensor"] and fsdp.replicated_over == [] and fsdp.fsdp_saving_bytes == 0
    tp = view(run, "tensor_parallel_sync").state
    assert tp.split_over == ["tensor"] and tp.replicated_over == ["data"]


def test_memory_by_kind(run):
    m = view(run, "parallel_3d_fsdp").memory_by_kind
    assert m["state"] == pytest.approx(12 * MIB, rel=0.01)
    assert m["gathered_weights"] >= 8 * MIB      # both stages' blocks gathered over data
    assert m["gradients"] > m["activations"]


def test_json_shape(run):
    doc = run("parallel_3d").to_json()["summary"]["parallelism"]
    assert doc["mesh"]["axes"] == [{"name": "data", "size": 2}, {"name": "pipe", "size": 2},
                                   {"name": "tensor", "size": 2}]
    assert doc["pipeline"]["time_s"] > 0
    assert {k: v for k, v in doc["pipeline"].items() if k != "time_s"} == {
        "stages": 2, "microbatches": 4, "loops": 1, "iterations": 5, "padding_iterations": 1, "bubble_fraction": 0.2,
        "axis": "pipe"}
    assert set(doc["state"]) >= {"bytes_per_device", "split_over", "replicated_over", "fsdp_saving_bytes"}
    row = doc["collectives"][0]
    assert set(row) == {"axis", "axis_size", "kind", "role", "count_per_step", "bytes_per_step", "time_s", "exposed_s"}


def test_single_device_has_no_view(run):
    assert view(run, "per_example_grads") is None
    assert "parallelism" not in run("per_example_grads").to_json()["summary"]


def test_recorded_mesh_names_win(run):
    profile = run("parallel_3d").profile
    named = parallelism.build(profile, mesh=[("dp", 2), ("pp", 2), ("tp", 2)])
    assert mesh(named) == [("dp", 2), ("pp", 2), ("tp", 2)] and named.mesh_source == "given"
    assert named.pipeline.axis == "pp" and named.state.replicated_over == ["dp"]


def test_axes_inferred_from_groups_alone():
    def ins(groups=(), pairs=()):
        return Instruction("c", "all-reduce", "main", "f32", (4,), 16, "", None, False,
                           replica_groups=groups, source_target_pairs=pairs)
    # data x tensor over 8: groups over stride 4 and over stride 1 (size 4)
    axes = infer_axes([ins(((0, 4), (1, 5), (2, 6), (3, 7))), ins(((0, 1, 2, 3), (4, 5, 6, 7)))], 8)
    assert [(a.size, a.stride) for a in axes] == [(2, 4), (4, 1)]
    # a composite group (data and pipe together, stride 2 size 4) is not an axis of its own
    axes = infer_axes([ins(((0, 2, 4, 6), (1, 3, 5, 7))), ins(((0, 2), (1, 3), (4, 6), (5, 7))),
                        ins(((0, 4), (1, 5), (2, 6), (3, 7)))], 8)
    assert [(a.size, a.stride) for a in axes] == [(2, 4), (2, 2), (2, 1)]
    # the axis nothing runs over is filled in
    axes = infer_axes([ins(pairs=((0, 1), (1, 0), (2, 3), (3, 2), (4, 5), (5, 4), (6, 7), (7, 6)))], 8)
    assert [(a.size, a.stride) for a in axes] == [(4, 2), (2, 1)]
    assert Axis("x", 4, 2).coordinate(5) == 2


def test_weight_like_shapes():
    weights = {(256, 256), (2, 256, 256)}
    assert weight_like((1, 256, 256), weights)          # a stage's [1, ...] slice
    assert weight_like((64, 256, 256), weights, gradient=True)      # per-example gradients
    assert not weight_like((64, 256, 256), weights)     # a forward [batch, *weight] is an activation
    assert not weight_like((16, 256), weights)          # a microbatch's activations
    assert not weight_like((256,), weights)


# -- the rules it carries ---------------------------------------------------------------------------------

def findings(run, case, rule):
    return [f for f in run(case).findings if f.rule == rule]


def test_schedule_loop_gets_stage_remat_not_unroll(run):
    from advisor.job import Job
    from advisor.rules import BY_ID

    rule = BY_ID["scan-dynamic-update-slice"]
    options = {rule.id: {"min_share": 0.0, "min_total_share": 0.0}}
    (f,) = Job((rule,), options).analyze(run("pipeline_looping").profile).findings
    assert f.evidence["pipeline_schedule_loop"] and f.evidence["devices"] == 8
    assert "remat the stage step" in f.recommendation.text and "unroll" not in f.recommendation.text.split(";")[0]
    assert "scan_layers=False" not in f.recommendation.text
    # per device: the op time of the 8 devices is divided by 8
    per_device = f.evidence["time_per_step_ms"]
    assert per_device == pytest.approx(f.evidence["share_of_op_time"] * f.evidence["op_time_per_step_ms"] / 8, rel=0.05)


def test_exposed_communication_advice_follows_the_role(run):
    from advisor.job import Job
    from advisor.rules import BY_ID

    rule = BY_ID["exposed-communication"]
    advice = {}
    for case in ("pipeline_gpipe_m2", "tensor_parallel_sync", "parallel_3d"):
        (f,) = Job((rule,), {rule.id: {"min_share": 0.0}}).analyze(run(case).profile).findings
        advice[case] = (f.evidence["dominant_role"], f.recommendation.text)
    role, text = advice["pipeline_gpipe_m2"]
    assert role == "pipeline-transfer" and "microbatch" in text and "group the gradients" not in text
    role, text = advice["tensor_parallel_sync"]
    assert role == "tensor-parallel" and "overlap" in text and "group the gradients" not in text


def test_replicated_state_partly_replicated(run):
    (f,) = findings(run, "parallel_3d", "replicated-state")
    ev = f.evidence
    assert ev["split_over"] == ["pipe", "tensor"] and ev["replicated_over"] == ["data"]
    assert "copied over data" in f.title and "full copy" not in f.title
    assert f.recommendation.expected.saving == ev["fsdp_saving_bytes"] == pytest.approx(12 * MIB, rel=0.01)
    assert not findings(run, "parallel_3d_fsdp", "replicated-state")


def test_weights_are_not_activations(run):
    for case in ("parallel_3d", "parallel_3d_fsdp", "per_example_grads", "pipeline_looping"):
        assert not [f for f in findings(run, case, "float32-activations") if f.evidence["share_of_peak"] > 0.3], case


def test_text_report_section(run):
    import io

    from rich.console import Console

    from advisor.report.parallelism_text import render

    out = io.StringIO()
    render(run("parallel_3d").to_json(), Console(file=out, width=160))
    text = out.getvalue()
    assert "mesh: data=2 x pipe=2 x tensor=2" in text
    assert "bubble 20.0%" in text and "copied over data" in text and "pipeline-transfer" in text


def test_text_report_keeps_names_as_data(run):
    import io

    from rich.console import Console

    from advisor.report.parallelism_text import render

    doc = run("parallel_3d").to_json()
    doc["summary"]["parallelism"]["mesh"]["axes"][0]["name"] = "[bold red]dp[/]\x1b[2J"
    doc["summary"]["parallelism"]["collectives"][0]["axis"] = "[link=x]t[/link]"
    out = io.StringIO()
    render(doc, Console(file=out, width=160))
    assert "[bold red]dp[/]\\x1b[2J" in out.getvalue() and "\x1b" not in out.getvalue()
    assert "[link=x]t[/link]" in out.getvalue()


def test_small_sizes_print_in_kib():
    from advisor.units import mib, size

    assert mib(20 * 1024) == "20.0 KiB" and mib(0) == "0.0 MiB" and mib(3 * MIB) == "3.0 MiB"
    assert size(4) == "4 B"


def test_json_validates_against_the_schema(run):
    import jsonschema

    from advisor.report.json_report import schema

    runs_schema = schema("analyze")["$defs"]["run"]["properties"]["summary"]["properties"]["parallelism"]
    for case in ("parallel_3d", "tensor_parallel_async", "pipeline_looping"):
        jsonschema.Draft202012Validator(runs_schema).validate(run(case).to_json()["summary"]["parallelism"])


def test_mesh_flag_names_the_axes(tmp_path):
    import json

    from conftest import cli

    logdir = materialize("parallel_3d", tmp_path)
    proc = cli("analyze", logdir, "--format", "json", "--mesh", "dp=2,pp=2,tp=2", "--select", "replicated-state")
    assert proc.returncode == 0, proc.stderr
    (run,) = json.loads(proc.stdout)["runs"]
    par = run["summary"]["parallelism"]
    assert [a["name"] for a in par["mesh"]["axes"]] == ["dp", "pp", "tp"] and par["mesh"]["source"] == "given"
    assert par["state"]["replicated_over"] == ["dp"] and par["pipeline"]["axis"] == "pp"
    (f,) = run["findings"]
    assert f["evidence"]["replicated_over"] == ["dp"]


@pytest.mark.parametrize("text", ["data=2,pipe", "data=x", "data=0", "a=2,a=4"])
def test_bad_mesh_flag_is_one_line_exit_2(tmp_path, text):
    from conftest import cli

    proc = cli("analyze", materialize("per_example_grads", tmp_path), "--mesh", text)
    assert proc.returncode == 2 and "--mesh" in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_mesh_that_does_not_cover_the_devices_is_inferred_with_a_note(run):
    profile = run("parallel_3d").profile
    v = parallelism.build(profile, mesh=[("data", 4)])
    assert v.mesh_source == "inferred" and mesh(v) == [("data", 2), ("pipe", 2), ("tensor", 2)]
    assert any("does not cover" in n for n in v.notes)      # the view returns the note: the job adds it to the run's


def test_trace_records_the_mesh(tmp_path):
    import json

    import jax
    import numpy as np
    from jax.sharding import Mesh

    import advisor

    mesh = Mesh(np.array(jax.devices()[:1]), ("data",))
    f = jax.jit(lambda x: x @ x)
    x = np.ones((64, 64), np.float32)
    f(x).block_until_ready()
    with advisor.trace(tmp_path, mesh=mesh, select=[]) as t:
        with t.step():
            f(x)
    assert json.loads((t.run_dir / "advisor_run.json").read_text())["mesh"] == [["data", 1]]
    assert t.report is not None


def test_html_draws_the_schedule_and_collectives_by_axis(tmp_path):
    from conftest import cli

    out = tmp_path / "report.html"
    proc = cli("analyze", materialize("pipeline_looping", tmp_path), "--format", "html", "--output", out,
               "--mesh", "data=2,<b>pipe</b>=4")
    assert proc.returncode == 0, proc.stderr
    html = out.read_text()
    assert 'aria-label="pipeline schedule"' in html and 'aria-label="collectives by axis"' in html
    assert "27.3%" in html and "pipeline-transfer" in html
    assert "<b>pipe</b>" not in html and "&lt;b&gt;pipe&lt;/b&gt;" in html


def test_spmd_partitioned_programs(loaded_profile):
    """Sharded jit (XLA's SPMD partitioner): an all-reduce with no replica groups runs over every
    device, and the gradients it reduces may be transposed; FSDP's gathers are named as such."""
    (dp,) = loaded_profile("corpus/sharded_jit_warm")
    v = parallelism.of(dp.profile)
    assert mesh(v) == [("data", 8)] and [r.role for r in v.collectives] == ["gradient-sync"]
    assert v.state.replicated_over == ["data"] and v.state.split_over == []
    (fsdp,) = loaded_profile("parallel/fsdp")
    v = parallelism.of(fsdp.profile)
    assert mesh(v) == [("data", 8)] and rows(v, "fsdp-gather", "data")
    assert not rows(v, "tensor-parallel")       # the partitioner's resharding over data is not tensor parallelism
    assert v.state.split_over == ["data"] and v.state.fsdp_saving_bytes == 0


def test_exposed_time_is_measured_per_collective(run, loaded_profile):
    """Each row's exposed time is its collectives' time with no compute of the device beside it,
    measured per collective: over all rows it adds up to the devices' own exposed time."""
    for profile in (run("parallel_3d").profile, loaded_profile("gpu_data_parallel")[0].profile):
        v = parallelism.of(profile)
        assert all(0 <= r.exposed_s <= r.time_s + 1e-9 for r in v.collectives)
        devices = activity.of(profile).devices
        mean_exposed_s = sum(d.exposed_ns for d in devices) / len(devices) / 1e9
        assert sum(r.exposed_s for r in v.collectives) == pytest.approx(mean_exposed_s, rel=0.02)
