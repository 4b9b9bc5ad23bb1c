"""Run -> hosts -> devices, on traces recorded on 8 simulated CPU devices (fixtures/record_parallel.py)."""

import re
import shutil

import pytest

from advisor.engine import analyze_path
from advisor.views import activity, step_time
from conftest import FIXTURES, cli


def test_data_parallel_is_one_run_of_eight_devices(loaded_profile):
    (analysis,) = loaded_profile("parallel/data_parallel")
    p = analysis.profile
    assert [h.name for h in p.hosts] == ["vm"]
    assert [d.name for d in activity.of(p).devices] == [f"cpu:{i}" for i in range(8)]
    for d in activity.of(p).devices:
        # the four parts add up to the step, per device: no device's figure is a sum over devices
        assert d.compute_ns + d.transfer_ns + d.wait_ns + d.idle_ns == pytest.approx(d.step_ns, rel=1e-6)
        assert d.compute_ns > 0 and d.transfer_ns > 0 and d.wait_ns > 0
        assert d.peak_bytes == p.memory.peak_bytes
    # the gradient all-reduces are found through their HLO opcode, the one JAX named after psum too
    module = p.modules[p.step_module]
    ran = set(activity.of(p).devices[0].collectives)
    assert "psum_invariant.119" in ran
    assert {module.instructions[op].opcode for op in ran} == {"all-reduce"}
    summary = analysis.summary
    assert summary["op_time_per_step_ms"] < summary["step_time_ms"]
    assert len(summary["devices"]) == 8 and {d["host"] for d in summary["devices"]} == {"vm"}
    assert sum(d["slowest"] for d in summary["devices"]) == 1
    assert {"collective", "matmul"} <= set(summary["devices"][0]["category_ms"])


def test_fsdp_parameters_are_sharded_and_gathered(loaded_profile):
    p = loaded_profile("parallel/fsdp")[0].profile
    module = p.modules[p.step_module]
    params = [i for i in module.instructions.values() if i.opcode == "parameter" and i.computation.startswith("main")]
    weights = [i for i in params if i.dims == (64, 512)]   # 512 x 512 weights, 1/8 per device
    assert weights and all(i.sharded for i in weights)
    gathers = [i for i in module.instructions.values() if i.collective == "all-gather"]
    assert gathers and max(i.bytes_moved(8) for i in gathers) == 512 * 512 * 4 * 7 // 8


def test_single_device_is_one_host_with_one_device(loaded_profile):
    (analysis,) = loaded_profile("transformer_scan")
    p = analysis.profile
    assert len(p.hosts) == 1 and [d.name for d in activity.of(p).devices] == ["cpu:0"]
    d = activity.of(p).devices[0]
    assert d.transfer_ns == d.wait_ns == 0 and d.compute_ns > 0
    assert len(analysis.summary["devices"]) == 1


def test_text_report_has_a_device_table_only_for_many_devices():
    many = cli("analyze", FIXTURES / "parallel" / "straggler").stdout
    assert "8 devices on 1 host" in many and "slowest" in many and "cpu:7" in many
    one = cli("analyze", FIXTURES / "transformer_scan").stdout
    assert "devices on" not in one


def test_host_files_in_one_folder_are_one_run(tmp_path, loaded_profile):
    src = next((FIXTURES / "parallel" / "straggler").rglob("*.xplane.pb"))
    run = tmp_path / "run"
    run.mkdir()
    for host in ("worker0", "worker1"):
        shutil.copy(src, run / f"{host}.xplane.pb")
    (run / "worker2.xplane.pb").write_bytes(src.read_bytes()[:5000])    # a truncated host
    (analysis,) = analyze_path(tmp_path)
    p = analysis.profile
    assert [h.name for h in p.hosts] == ["worker0", "worker1"]
    assert len(activity.of(p).devices) == 16 and {d.host for d in activity.of(p).devices} == {"worker0", "worker1"}
    assert any(w.startswith("host worker2 skipped") for w in p.warnings)
    # the same host twice: lined up by step number, the run's step time is that host's
    assert step_time.of(p).median_ns == step_time.of(loaded_profile("parallel/straggler")[0].profile).median_ns
    doc = analysis.to_json()
    assert [h["name"] for h in doc["hosts"]] == ["worker0", "worker1"]
    assert all(len(h["devices"]) == 8 for h in doc["hosts"])


def test_real_eight_gpu_trace_reports_each_gpu(loaded_profile):
    """TensorFlow BERT on 8 V100s (3 ran kernels in the window): no steps, so the figures cover the window."""
    (analysis,) = loaded_profile("gpu-traces/tf_bert_v100_multiworker")
    s = analysis.summary
    active = [d["name"] for d in s["devices"]]
    assert sorted(active + s["devices_idle"]) == sorted(f"/device:GPU:{i}" for i in range(8))
    for d in s["devices"]:
        assert d["steps"] == 0 and d["kernels"] >= 0 and "compute_ms" in d
        assert d["compute_ms"] + d["collective_transfer_ms"] + d["collective_wait_ms"] + d["idle_ms"] == \
            pytest.approx(d["step_mean_ms"], abs=0.01)


def test_two_host_run_is_one_run_lined_up_by_step(loaded_profile):
    """Two jax.distributed processes (gloo), 4 simulated devices each, one run folder."""
    (analysis,) = loaded_profile("parallel/two_hosts")
    p = analysis.profile
    assert [h.name for h in p.hosts] == ["host0", "host1"]
    assert [len(h.devices) for h in p.hosts] == [4, 4]
    assert {d.host for d in activity.of(p).devices} == {"host0", "host1"}
    # each host has its own clock: the run's step is the slower host's, step by step
    slower = sorted(max(h.step_ns(s.number) for h in p.hosts) for s in p.steps)
    assert step_time.of(p).median_ns == pytest.approx((slower[1] + slower[2]) / 2)
    assert step_time.of(p).median_ns >= max(sorted(s.duration_ns for s in h.steps)[1] for h in p.hosts)
    # gloo records no rendezvous waits: they are estimated, and the run says so
    assert any("no wait-for-peers events" in n for n in p.notes)
    assert all(d.wait_ns >= 0 and d.transfer_ns > 0 for d in activity.of(p).devices)


def test_html_report_charts_each_device(loaded_profile):
    from advisor.report.html import _device_chart

    summary = loaded_profile("parallel/straggler")[0].summary
    (chart,) = _device_chart(summary)
    assert "<svg" in chart and "cpu:5" in chart and "slowest" in chart and "ms per step" in chart
    assert _device_chart(loaded_profile("transformer_scan")[0].summary) == []


def test_compare_judges_the_slowest_host_per_step(loaded_profile):
    from advisor.compare import metrics

    (analysis,) = loaded_profile("parallel/two_hosts_straggler")
    p = analysis.profile
    expected = [round(max(h.step_ns(s.number) for h in p.hosts) / 1e6, 3) for s in p.steps]
    assert metrics(analysis.document()).step_times_ms == expected
    assert expected != [round(s.duration_ns / 1e6, 3) for s in p.hosts[0].steps]
    # op time by category is one device's: never the devices' sum, which would exceed the step
    assert metrics(analysis.document()).category_ms_per_step["collective"] < max(expected)


def test_a_host_that_ran_another_program_is_skipped_with_one_line(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    for host, fixture in (("host0", "straggler"), ("host1", "data_parallel")):
        shutil.copy(next((FIXTURES / "parallel" / fixture).rglob("*.xplane.pb")), run / f"{host}.xplane.pb")
    (analysis,) = analyze_path(run)
    assert [h.name for h in analysis.profile.hosts] == ["host0"]
    (line,) = [w for w in analysis.profile.warnings if w.startswith("host host1 skipped")]
    assert "step program" in line


def test_collectives_per_step_from_the_hlo(loaded_profile):
    """comm_bound all-reduces its 8 MiB of gradients once per step: 2 x 8 MiB x 7/8 through each device."""
    (c,) = loaded_profile("parallel/comm_bound")[0].summary["collectives"]
    assert c["opcode"] == "all-reduce" and c["per_step"] == 1
    assert c["bytes_per_device"] == pytest.approx(2 * 8 * 2**20 * 7 / 8, rel=0.01)
    assert c["transfer_ms"] + c["wait_ms"] == pytest.approx(c["time_ms"], abs=0.01)
    assert c["algorithmic_gb_per_s"] > 0
    text = cli("analyze", FIXTURES / "parallel" / "comm_bound").stdout
    assert "collectives per step" in text and re.search(r"\d [kMGT]?B/s", text)


@pytest.mark.parametrize("name", ["parallel/two_hosts", "gpu_straggler", "gpu-traces/tf_bert_v100_multiworker"])
def test_many_device_json_follows_the_schema(name):
    import jsonschema

    from advisor.report.json_report import schema
    from conftest import analyze_json

    doc = analyze_json(FIXTURES / name)
    jsonschema.Draft202012Validator(schema("analyze")).validate(doc)
    assert doc["runs"][0]["hosts"] and doc["runs"][0]["summary"]["devices"]
