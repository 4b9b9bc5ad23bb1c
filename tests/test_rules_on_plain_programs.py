"""The rules on traces of plain Flax / JAX programs recorded here, not by our workloads."""

import subprocess
import sys
from pathlib import Path

import pytest

from conftest import analyze_json, rule_ids

PROGRAMS = Path(__file__).with_name("plain_programs.py")


def record(tmp_path_factory, kind, *flags):
    out = tmp_path_factory.mktemp("plain") / "logs"
    subprocess.run([sys.executable, str(PROGRAMS), kind, str(out), *flags],
                   check=True, capture_output=True, timeout=300)
    return out


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    return {
        "scan": record(tmp_path_factory, "tower"),
        "scan_remat": record(tmp_path_factory, "tower", "remat"),
        "unrolled": record(tmp_path_factory, "tower", "unrolled"),
        "wide": record(tmp_path_factory, "wide"),
        "wide_donated": record(tmp_path_factory, "wide", "donate"),
    }


def test_scan_without_remat_gets_both_scan_and_remat_findings(traces):
    doc = analyze_json(traces["scan"])
    assert {"scan-dynamic-update-slice", "missing-remat"} <= rule_ids(doc)
    # not our workload: no bundled config to change, but the advice is still concrete
    for f in doc["runs"][0]["findings"]:
        assert f["recommendation"]["config"] == {}
        assert f["recommendation"]["text"]


def test_scan_with_remat_is_silent(traces):
    assert rule_ids(analyze_json(traces["scan_remat"])) == set()


def test_unrolled_has_no_scan_finding(traces):
    ids = rule_ids(analyze_json(traces["unrolled"]))
    assert "scan-dynamic-update-slice" not in ids
    assert "missing-remat" in ids


def test_donation(traces):
    assert "missing-buffer-donation" in rule_ids(analyze_json(traces["wide"]))
    assert "missing-buffer-donation" not in rule_ids(analyze_json(traces["wide_donated"]))


def test_source_points_at_the_users_file(traces):
    doc = analyze_json(traces["scan"])
    sources = [f["source"] for f in doc["runs"][0]["findings"] if f["source"]]
    assert sources and all(s.split(":")[0].endswith("plain_programs.py") for s in sources)
