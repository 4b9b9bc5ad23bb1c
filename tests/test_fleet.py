"""Many runs: --jobs and --engine ray (a Ray task per host file) give the JSON of the sequential
analysis, a worker that dies costs only its run, --format jsonl streams one document per run in path
order, the text report ends with a fleet table, and URLs (file://, an in-process memory:// filesystem)
read like the paths they name."""

import json
import os
import shutil
import sys

import jsonschema
import pytest

from advisor.report.json_report import schema
from advisor.rule import Rule
from conftest import FIXTURES, cli

RUNS = ("transformer_scan", "transformer_remat", "transformer_bf16")


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    """A logdir of three fixture runs (links to the committed files) and one unreadable run."""
    root = tmp_path_factory.mktemp("fleet")
    for name in RUNS:
        shutil.copytree(FIXTURES / name, root / name, copy_function=os.symlink)
    broken = root / "broken" / "plugins" / "profile" / "2026_01_01_00_00_00"
    broken.mkdir(parents=True)
    (broken / "host.xplane.pb").write_bytes(b"\x0a\x05trunc")
    return root


@pytest.fixture(scope="module")
def sequential(fleet):
    result = cli("analyze", fleet, "--format", "json", "--jobs", "1")
    assert result.returncode == 3, result.stderr
    return result


def _one_line_error(result):
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("advisor: error: ") and "Traceback" not in result.stderr, \
        result.stderr
    return lines[0]


def test_jobs_gives_the_json_of_the_sequential_analysis(fleet, sequential):
    doc = json.loads(sequential.stdout)
    assert [r["path"] for r in doc["runs"]] == sorted(r["path"] for r in doc["runs"]) and len(doc["runs"]) == 3
    assert [f["path"] for f in doc["failed"]] == [str(next(fleet.rglob("host.xplane.pb")))]
    parallel = cli("analyze", fleet, "--format", "json", "--jobs", "2")
    assert parallel.returncode == 3 and parallel.stdout == sequential.stdout
    assert "not analyzed" in parallel.stderr and "Traceback" not in parallel.stderr


def test_the_api_takes_jobs(fleet, sequential):
    import advisor

    report = advisor.analyze(fleet, jobs=2)
    assert json.loads(report.to_json()) == json.loads(sequential.stdout)


def test_jsonl_is_one_document_per_run_in_path_order(fleet, sequential):
    result = cli("analyze", fleet, "--format", "jsonl", "--jobs", "2")
    assert result.returncode == 3
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    doc = json.loads(sequential.stdout)
    paths = [line["run"]["path"] if line["run"] else line["failed"]["path"] for line in lines]
    assert paths == sorted(paths) and len(lines) == 4
    assert [line["run"] for line in lines if line["run"]] == doc["runs"]
    assert [line["failed"] for line in lines if line["failed"]] == doc["failed"]
    run_schema = {"$defs": schema("analyze")["$defs"], "$ref": "#/$defs/run"}
    for line in lines:
        assert list(line)[:5] == ["schema_version", "advisor_version", "command", "inputs", "warnings"]
        if line["run"]:
            jsonschema.Draft202012Validator(run_schema).validate(line["run"])


def test_text_report_of_a_fleet_ends_with_the_fleet_table(fleet):
    result = cli("analyze", fleet, "--jobs", "1")
    assert result.returncode == 3
    table = result.stdout[result.stdout.index("fleet: 4 runs, 1 not analyzed"):]
    for name in (*RUNS, "broken"):
        assert name in table
    assert "scan-dynamic-update-slice" in table and "not analyzed" in table
    assert "slowest steps: transformer_scan" in table and "largest peaks: transformer_scan" in table


@pytest.mark.skipif(not __import__("importlib").util.find_spec("ray"),
                    reason="ray is not installed: pip install -e '.[ray]' to test --engine ray")
def test_ray_engine_gives_the_json_of_the_sequential_analysis(fleet, sequential):
    result = cli("analyze", fleet, "--format", "json", "--engine", "ray", "--ray-address", "local", "--jobs", "2")
    assert result.returncode == 3, result.stderr
    assert result.stdout == sequential.stdout


@pytest.fixture(scope="module")
def hosts(tmp_path_factory):
    """A logdir of runs of two hosts: a committed one, the same with its second host unreadable, and
    with its first host unreadable (links to the committed files)."""
    root = tmp_path_factory.mktemp("hosts")
    shutil.copytree(FIXTURES / "parallel" / "two_hosts", root / "two_hosts", copy_function=os.symlink)
    committed = FIXTURES / "parallel" / "two_hosts" / "plugins" / "profile" / "run"
    for name, broken in (("second_host_unreadable", "host1"), ("first_host_unreadable", "host0")):
        run = root / name / "plugins" / "profile" / "run"
        run.mkdir(parents=True)
        for host in ("host0", "host1"):
            if host == broken:
                (run / f"{host}.xplane.pb").write_bytes(b"\x0a\x05trunc")
            else:
                (run / f"{host}.xplane.pb").symlink_to(committed / f"{host}.xplane.pb")
    return root


@pytest.mark.skipif(not __import__("importlib").util.find_spec("ray"),
                    reason="ray is not installed: pip install -e '.[ray]' to test --engine ray")
def test_ray_engine_reads_each_host_file_in_a_task(hosts, monkeypatch):
    sequential = cli("analyze", hosts, "--format", "json", "--jobs", "1")
    assert sequential.returncode == 3, sequential.stderr
    doc = json.loads(sequential.stdout)
    assert [len(r["hosts"]) for r in doc["runs"]] == [1, 2]
    assert any("host host1 skipped" in w for w in doc["runs"][0]["warnings"])
    assert [f["path"] for f in doc["failed"]] == [str(next((hosts / "first_host_unreadable").rglob("host0.*")))]

    messages = []
    monkeypatch.setattr("advisor.cli._progress", lambda enabled: messages.append)
    result = cli("analyze", hosts, "--format", "json", "--engine", "ray", "--ray-address", "local", "--jobs", "2")
    assert result.returncode == 3, result.stderr
    assert result.stdout == sequential.stdout
    # 3 runs of 2 hosts: a task per host file and one per run to merge its hosts
    assert any("in 9 Ray tasks" in m for m in messages), messages


def test_ray_engine_without_ray_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)    # import ray raises ImportError
    line = _one_line_error(cli("analyze", FIXTURES / "transformer_scan", "--engine", "ray"))
    assert "pip install ray" in line


def test_bad_ray_address_and_engine_options():
    assert "no Ray cluster answers" in _one_line_error(
        cli("analyze", FIXTURES / "transformer_scan", "--engine", "ray", "--ray-address", "127.0.0.1:1"))
    assert "--engine ray" in _one_line_error(
        cli("analyze", FIXTURES / "transformer_scan", "--ray-address", "auto"))
    assert cli("analyze", FIXTURES / "transformer_scan", "--jobs", "0").returncode == 2


def _dies_on_bf16(profile):
    """A rule's check that kills the process analyzing transformer_bf16, as a native crash would."""
    if "transformer_bf16" in profile.path:
        os._exit(1)
    return []


DIES_ON_BF16 = Rule(id="dies-on-bf16", severity="info", backends=("cpu",), summary="kills its worker",
                    check=_dies_on_bf16, doc="")


def test_a_worker_that_dies_costs_only_the_run_it_analyzed(fleet, sequential, monkeypatch):
    """A dead worker breaks the pool: every run it left undone is analyzed again in a process of its
    own, and only the one that dies again is listed as not analyzed (the rule reaches the workers in
    the job, as every rule does). transformer_bf16 is the first run a worker reads in full, so the
    runs after it are still undone when it dies."""
    from advisor import rules

    monkeypatch.setattr(rules, "ALL", [*rules.ALL, DIES_ON_BF16])
    result = cli("analyze", fleet, "--format", "json", "--jobs", "2")
    assert result.returncode == 3, result.stderr
    doc, before = json.loads(result.stdout), json.loads(sequential.stdout)
    bf16 = next(r["path"] for r in before["runs"] if "transformer_bf16" in r["path"])
    for run in doc["runs"]:
        run["rules"]["ran"].remove(DIES_ON_BF16.id)     # the one difference: the rule added here ran
    assert doc["runs"] == [r for r in before["runs"] if r["path"] != bf16] and len(doc["runs"]) == 2
    died = {"path": bf16, "reason": f"{bf16}: the process analyzing it died (a crash in a native library, "
                                    "or out of memory); analyze this run alone to see the error"}
    assert doc["failed"] == [*before["failed"], died]
    assert f"advisor: not analyzed: {died['reason']}" in result.stderr and "Traceback" not in result.stderr


def _findings(doc):
    return [[(f["rule"], f["title"]) for f in run["findings"]] for run in doc["runs"]]


def test_file_url_reads_the_local_path():
    from conftest import analyze_json

    local = analyze_json(FIXTURES / "transformer_scan")
    result = cli("analyze", (FIXTURES / "transformer_scan").as_uri(), "--format", "json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["runs"] == local["runs"]


def test_memory_filesystem_url_gives_the_findings_of_the_local_path():
    import fsspec

    from conftest import analyze_json

    fs = fsspec.filesystem("memory")
    fs.put(str(FIXTURES / "transformer_scan"), "/advisor-test/logdir/transformer_scan", recursive=True)
    try:
        before = {f: fs.info(f)["size"] for f in fs.find("/advisor-test")}
        result = cli("analyze", "memory://advisor-test/logdir", "--format", "json", "--jobs", "2")
        assert result.returncode == 0, result.stderr
        remote, local = json.loads(result.stdout), analyze_json(FIXTURES / "transformer_scan")
        assert _findings(remote) == _findings(local)
        assert remote["runs"][0]["summary"] == local["runs"][0]["summary"]
        assert remote["runs"][0]["path"].startswith("memory://advisor-test/logdir/transformer_scan/plugins/")
        assert "advisor-fetch-" not in result.stdout
        one = cli("analyze", remote["runs"][0]["path"], "--format", "json")     # the .xplane.pb's own URL
        assert one.returncode == 0 and json.loads(one.stdout)["runs"] == remote["runs"]
        assert {f: fs.info(f)["size"] for f in fs.find("/advisor-test")} == before   # nothing written there
        compared = cli("compare", "memory://advisor-test/logdir/transformer_scan", FIXTURES / "transformer_scan",
                       "--format", "json")
        assert compared.returncode == 0, compared.stderr
        pair = json.loads(compared.stdout)["pairs"][0]
        assert pair["findings_added"] == pair["findings_removed"] == []
    finally:
        fs.rm("/advisor-test", recursive=True)


@pytest.mark.parametrize("url, says", [
    ("memory://no-such-bucket/logdir", "no such file or folder"),
    ("nosuchscheme://bucket/logdir", "not a URL advisor can read"),
    ("file://otherhost/tmp/logdir", "names a path on this machine"),
])
def test_bad_urls_are_one_line_and_exit_2(url, says):
    assert says in _one_line_error(cli("analyze", url))


def test_missing_filesystem_backend_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "s3fs", None)
    line = _one_line_error(cli("analyze", "s3://bucket/logdir"))
    assert "s3fs" in line and "install" in line
