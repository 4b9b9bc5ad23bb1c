"""advisor calibrate: its figures apply to traces recorded on the machine it measured (name, CPU model,
cores, memory), never to one recorded elsewhere under the same name; and its cache and DRAM roofs keep
a calibrated report from calling its own peak wrong for most ops."""

import json

import pytest

from advisor import calibrate, hardware
from advisor.job import Job
from advisor.load.loader import load_run
from advisor.locate import find_runs
from conftest import FIXTURES, cli

# Measured by `advisor calibrate` on the 2-core development VM the committed fixtures come from
# (AMD EPYC, 2026-11): matmul 223-309 GFLOP/s; stream 255 GB/s in L1d, 179-215 in L2, 145-184 in L3,
# 8-12 GB/s from DRAM.
VM_ROOFS = [{"level": "L1d", "fits_bytes": 96 << 10, "bytes_per_s": 250e9},
            {"level": "L2", "fits_bytes": 2 << 20, "bytes_per_s": 190e9},
            {"level": "L3", "fits_bytes": 32 << 20, "bytes_per_s": 165e9},
            {"level": "DRAM", "fits_bytes": None, "bytes_per_s": 9e9}]
VM = {"name": "vm", "cpu_model": "AMD EPYC", "cores": 2, "memory_bytes": 25276510208}


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ADVISOR_CACHE_DIR", str(tmp_path))
    return tmp_path


def _store(roofs=VM_ROOFS, hw=VM):
    calibrate.save({"host": hw["name"], "hardware": hw, "backend": "cpu", "device_kind": "cpu", "dtype": "float32",
                    "flops_per_s": 223e9, "bytes_per_s": roofs[-1]["bytes_per_s"], "roofs": roofs,
                    "measured_at": "2026-11-26 13:24:11"})


def _efficiency(recorded_on=None):
    """transformer_scan's efficiency, its run recording `recorded_on` as the machine it ran on."""
    profile = load_run(find_runs(FIXTURES / "transformer_scan")[0])
    if recorded_on is not None:
        profile.run_metadata["host"] = recorded_on
    return Job().analyze(profile).summary["efficiency"]


def test_calibrate_stores_the_machine_and_its_roofs(cache):
    out = cli("calibrate", "--size", "128", "--stream-mib", "16")
    assert out.returncode == 0 and "matmul" in out.stdout and "DRAM" in out.stdout
    (entry,) = json.loads((cache / calibrate.FILE).read_text())
    assert entry["hardware"] == hardware.this_host()
    roofs = entry["roofs"]
    assert roofs[-1]["level"] == "DRAM" and roofs[-1]["fits_bytes"] is None
    sizes = [r["fits_bytes"] for r in roofs[:-1]]
    assert sizes == sorted(sizes) and all(r["bytes_per_s"] > 0 for r in roofs)
    # the DRAM stream is never one that fits in a cache
    assert entry["stream_bytes"] >= 2 * max(sizes, default=0)
    assert calibrate.stored("cpu").flops_per_s == entry["flops_per_s"]


def test_a_trace_that_does_not_record_its_machine_is_not_calibrated(cache):
    """The committed fixture was recorded on a host named vm: a calibration of a host of that name is
    not applied to it, and the note says why and what to pass."""
    _store()
    eff = json.loads(cli("analyze", FIXTURES / "transformer_scan", "--format", "json").stdout)["runs"][0]["summary"][
        "efficiency"]
    assert eff["peak"] is None and eff["mfu"] is None
    (note,) = [n for n in eff["notes"] if "advisor calibrate measured" in n]
    assert "does not record the machine" in note and "--peak-flops 223G --peak-bandwidth 9.0GB/s" in note


def test_the_calibration_applies_on_the_same_machine_only(cache):
    _store()
    assert _efficiency(VM)["peak"]["source"].startswith("measured on vm by advisor calibrate")
    other = _efficiency(dict(VM, cores=4))
    assert other["peak"] is None and any("another machine of that name" in n for n in other["notes"])
    assert _efficiency(dict(VM, cpu_model="Intel Xeon"))["peak"] is None


def test_cache_and_dram_roofs_leave_few_ops_above_the_peak(cache):
    """Against DRAM's 9 GB/s alone, 130-odd ops of the step stream their in-cache data faster than the
    peak; with a roof per cache level an op is judged at the level its working set fits in."""
    _store(roofs=VM_ROOFS[-1:])
    dram_only = _efficiency(VM)
    (over,) = [n for n in dram_only["notes"] if "above 100% of the peak" in n]
    assert int(over.rsplit(" and ", 1)[1].split()[0]) + 5 > 100
    _store()
    eff = _efficiency(VM)
    over = [n for n in eff["notes"] if "above 100% of the peak" in n]
    assert len(over) <= 1 and (not over or " more" not in over[0])     # at most 5 ops, each named
    assert "bandwidth share unknown" not in eff["verdict"]
    assert all(c["bytes_share_of_peak"] is not None for c in eff["categories"])
    assert [r["level"] for r in eff["peak"]["bandwidth_roofs"]] == ["L1d", "L2", "L3", "DRAM"]


def test_api_traces_record_their_machine(tmp_path, cache):
    """advisor.trace writes the machine beside the trace: a calibration of this machine applies to it."""
    import jax
    import jax.numpy as jnp

    import advisor

    step = jax.jit(lambda x: jnp.tanh(x @ x))
    x = jnp.ones((256, 256))
    _store(hw=hardware.this_host())
    with advisor.trace(tmp_path) as t:
        for _ in range(3):
            with t.step():
                x = step(x).block_until_ready()
    meta = json.loads((t.run_dir / "advisor_run.json").read_text())
    assert meta["host"] == hardware.this_host()
    eff = t.report.runs[0].summary["efficiency"]
    assert eff["peak"]["source"].startswith(f"measured on {meta['host']['name']} by advisor calibrate")


def test_roofs_never_fall_as_the_working_set_shrinks():
    """A noisy run measured L2 below L3: data that fits in L2 fits in L3, so L2 takes L3's figure and
    keeps what was measured beside it."""
    from advisor.calibrate import ordered

    roofs = ordered([{"level": "L1d", "fits_bytes": 48 << 10, "bytes_per_s": 255e9},
                     {"level": "L2", "fits_bytes": 2 << 20, "bytes_per_s": 112e9},
                     {"level": "L3", "fits_bytes": 32 << 20, "bytes_per_s": 148e9},
                     {"level": "DRAM", "fits_bytes": None, "bytes_per_s": 10e9}])
    assert [r["bytes_per_s"] for r in roofs] == [255e9, 148e9, 148e9, 10e9]
    assert roofs[1]["measured_bytes_per_s"] == 112e9 and "measured_bytes_per_s" not in roofs[2]
