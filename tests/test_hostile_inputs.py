"""Inputs others produced: outputs that would land on them, non-finite baselines, badly typed values,
bombs. Each ends in one line on stderr and a documented exit code, never a traceback or a lost file."""

from __future__ import annotations

import json
import shutil

import pytest

from conftest import FIXTURES, cli

SCAN = FIXTURES / "transformer_scan"


def one_line(proc, code=2):
    assert proc.returncode == code, (proc.stdout, proc.stderr)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


@pytest.fixture()
def run(tmp_path):
    shutil.copytree(SCAN, tmp_path / "scan")
    return tmp_path / "scan"


def _snapshot(root):
    return {p: p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_outputs_never_overwrite_or_enter_an_input(run, tmp_path):
    xplane = next(run.rglob("*.xplane.pb"))
    before = _snapshot(run)
    for args in (["analyze", run, "--format", "json", "--output", xplane],
                 ["analyze", xplane, "--output", xplane.parent / "report.txt"],
                 ["analyze", run, "--output", run / "report.txt"],
                 ["compare", run, SCAN, "--output", run / "nested" / "cmp.txt"],
                 ["check", run, "--write-baseline", xplane],
                 ["check", run, "--write-baseline", tmp_path / "b.json", "--junit", run / "j.xml"],
                 ["check", run, "--write-baseline", tmp_path / "b.json", "--sarif", tmp_path / "b.json"]):
        line = one_line(cli(*args))
        assert "advisor: error:" in line and ("input" in line or "reads" in line or "same file" in line), line
    assert _snapshot(run) == before


def test_a_link_to_the_input_is_the_input(run, tmp_path):
    xplane = next(run.rglob("*.xplane.pb"))
    link = tmp_path / "link.pb"
    link.symlink_to(xplane)
    one_line(cli("analyze", xplane, "--format", "json", "--output", link))


def test_write_baseline_may_update_the_baseline_it_reads(run, tmp_path):
    baseline = tmp_path / "b.json"
    assert cli("check", run, "--write-baseline", baseline).returncode == 0
    proc = cli("check", run, "--baseline", baseline, "--write-baseline", baseline)
    assert proc.returncode == 0, proc.stderr
    json.loads(baseline.read_text())


def test_a_failed_write_leaves_the_previous_file(tmp_path):
    from advisor.outputs import atomic_open
    out = tmp_path / "report.json"
    out.write_text("previous")
    with pytest.raises(RuntimeError):
        with atomic_open(out) as fh:
            fh.write("half")
            raise RuntimeError("interrupted")
    assert out.read_text() == "previous" and list(tmp_path.iterdir()) == [out]


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_a_non_finite_baseline_is_refused(run, tmp_path, value):
    """A NaN step time compares false with everything: every budget would pass."""
    baseline = tmp_path / "b.json"
    assert cli("check", run, "--write-baseline", baseline).returncode == 0
    text = baseline.read_text()
    doc = json.loads(text)
    peak = doc["metrics"]["peak_memory_bytes"]
    baseline.write_text(text.replace(f'"peak_memory_bytes": {peak}', f'"peak_memory_bytes": {value}'))
    assert one_line(cli("check", run, "--baseline", baseline)).startswith("advisor: error:")


@pytest.mark.parametrize("key,value", [("step_times_ms", '["1"]'), ("peak_memory_bytes", '"big"'),
                                       ("backend", "5"), ("category_ms_per_step", "[]")])
def test_a_badly_typed_baseline_is_refused(run, tmp_path, key, value):
    baseline = tmp_path / "b.json"
    assert cli("check", run, "--write-baseline", baseline).returncode == 0
    doc = json.loads(baseline.read_text())
    doc["metrics"][key] = json.loads(value)
    baseline.write_text(json.dumps(doc))
    assert key in one_line(cli("check", run, "--baseline", baseline))


def test_a_deeply_nested_baseline_is_one_line(run, tmp_path):
    baseline = tmp_path / "b.json"
    baseline.write_text("[" * 100_000 + "]" * 100_000)
    one_line(cli("check", run, "--baseline", baseline))


@pytest.mark.parametrize("budget", ["nan", "inf", "-5%", "nan%"])
def test_budgets_must_be_finite_and_positive(run, tmp_path, budget):
    baseline = tmp_path / "b.json"
    assert cli("check", run, "--write-baseline", baseline).returncode == 0
    one_line(cli("check", run, "--baseline", baseline, "--max-memory-regression", budget))


@pytest.mark.parametrize("config,words", [
    ("[tool.advisor]\nselect = 5\n", "select = 5"),
    ("[tool.advisor]\nignore = [1, 2]\n", "ignore = [1, 2]"),
    ("[tool.advisor]\noptions = 'x'\n", "options = 'x'"),
    ("[tool.advisor.options]\nhost-bound = 3\n", "options ="),
    ("[tool.advisor]\n\"host-bound.min_idle_share\" = \"lots\"\n", "host-bound.min_idle_share: 'lots'"),
    ("[tool.advisor]\n\"host-bound.min_idle_share\" = [1]\n", "host-bound.min_idle_share: [1]"),
    ("[tool.advisor]\n\"host-bound.min_idle_share\" = nan\n", "host-bound.min_idle_share: nan"),
    ("[tool.advisor]\n\"missing-remat.min_bytes\" = -5\n", "missing-remat.min_bytes: -5"),
    ("[tool.advisor]\n\"missing-remat.min_bytes\" = true\n", "missing-remat.min_bytes: True"),
    ("tool = 5\n", None), ("[tool]\nadvisor = 5\n", "expected a table"),
    ("[tool.advisor]\nselect = \"\xff\"\n".encode("latin-1"), "cannot read it"),
])
def test_a_badly_typed_config_names_key_value_and_what_was_expected(tmp_path, config, words):
    path = tmp_path / "pyproject.toml"
    path.write_bytes(config if isinstance(config, bytes) else config.encode())
    proc = cli("analyze", SCAN, "--format", "json", cwd=tmp_path)
    if words is None:       # no [tool.advisor]: nothing to read
        assert proc.returncode == 0, proc.stderr
        return
    assert words in one_line(proc)


@pytest.mark.parametrize("option", ["host-bound.min_idle_share=nan", "host-bound.min_idle_share=inf",
                                    "missing-remat.min_bytes=-1", "missing-remat.min_bytes=lots"])
def test_a_bad_option_value_is_one_line(option):
    assert option.split("=")[0] in one_line(cli("analyze", SCAN, "--option", option))


def test_sizes_read_as_kubernetes_writes_them():
    from advisor.settings import parse_size
    assert parse_size("16G") == parse_size("16GB") == 16e9
    assert parse_size("16Gi") == parse_size("16GiB") == 16 * 2**30
    with pytest.raises(ValueError):
        parse_size("1e999GB")


@pytest.mark.parametrize("limit", [-5, 0, True, float("nan"), float("inf"), "lots", [1]])
def test_preflight_refuses_a_memory_limit_that_is_not_a_size(limit):
    from advisor.errors import AdvisorError
    from advisor.settings import parse_size_setting as _size
    with pytest.raises(AdvisorError, match="memory_limit"):
        _size(limit, "memory_limit")


def _gzip_of_zeros(size: int) -> bytes:
    import zlib
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = bytes(1 << 20)
    return b"".join(c.compress(block) for _ in range(size >> 20)) + c.flush()


def test_a_gzip_bomb_memory_profile_is_a_warning_the_rest_analyzed(run, monkeypatch):
    """A few KB that expand past the bound: not decompressed further (the bound is lowered here; the
    benchmark benchmarks/gzip_bomb.py measures the real one)."""
    from advisor.load import memprof
    monkeypatch.setattr(memprof, "MAX_BYTES", 4 << 20)
    monkeypatch.setattr(memprof, "FLOOR_BYTES", 1 << 20)
    bomb = _gzip_of_zeros(64 << 20)
    assert len(bomb) < 100_000
    next(run.rglob("memory.prof")).write_bytes(bomb)
    proc = cli("analyze", run, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert any("gzip bomb" in w for w in doc["warnings"]) and doc["runs"][0]["findings"]


def test_bounded_gunzip_reads_what_gzip_reads():
    import gzip

    from advisor.load.memprof import gunzip_bounded
    data = b"".join(bytes([i % 251]) * i for i in range(3000))
    two = gzip.compress(data) + gzip.compress(data[:1000])      # two members, as gzip allows
    assert gunzip_bounded(two, 1 << 30) == gzip.decompress(two)
    with pytest.raises(ValueError):
        gunzip_bounded(two, 1000)
    with pytest.raises(EOFError):
        gunzip_bounded(gzip.compress(data)[:-20], 1 << 30)


@pytest.mark.parametrize("content,words", [("[" * 100_000 + "]" * 100_000, "nested"),
                                           ('{"num_params": NaN}', "NaN"),
                                           ('{"config": ' + '{"a": ' * 80 + "1" + "}" * 81, "nested")])
def test_hostile_run_metadata_is_ignored_with_a_warning(run, content, words):
    next(run.rglob("advisor_run.json")).write_text(content)
    proc = cli("analyze", run, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    assert any("advisor_run.json" in w and words in w for w in json.loads(proc.stdout)["warnings"])


def test_memory_urls_with_dot_segments_and_chained_urls(tmp_path):
    """`.`/`..` in a memory:// URL raised FileExistsError; chained URLs (tar://...::file://...) never worked."""
    import tarfile

    import fsspec
    fs = fsspec.filesystem("memory")
    fs.put(str(SCAN), "/advisor-dots/logdir/scan", recursive=True)
    try:
        for url in ("memory://advisor-dots/logdir/./scan", "memory://advisor-dots/logdir/x/../scan/"):
            proc = cli("analyze", url, "--format", "json", "--jobs", "1")
            assert proc.returncode == 0, proc.stderr
            assert json.loads(proc.stdout)["runs"][0]["path"].startswith("memory://advisor-dots/logdir/scan/")
        one_line(cli("analyze", "memory://advisor-dots/../../etc"))
    finally:
        fs.rm("/advisor-dots", recursive=True)
    with tarfile.open(tmp_path / "runs.tar", "w") as tar:
        tar.add(SCAN, arcname="scan")
    url = f"tar://scan::{(tmp_path / 'runs.tar').as_uri()}"
    proc = cli("analyze", url, "--format", "json", "--jobs", "1")
    assert proc.returncode == 0, proc.stderr
    run = json.loads(proc.stdout)["runs"][0]
    assert run["path"].startswith("tar://scan/plugins/profile/") and run["path"].endswith(
        f".xplane.pb::{(tmp_path / 'runs.tar').as_uri()}") and run["findings"]
    again = cli("analyze", run["path"], "--format", "json", "--jobs", "1")    # the file's own URL
    assert again.returncode == 0 and json.loads(again.stdout)["runs"][0]["findings"] == run["findings"]


def test_large_metadata_tables_give_the_same_analysis(monkeypatch):
    """Past BIG_TABLE entries a plane's names are kept in arrays (a metadata-heavy trace cost ~10x its
    size in memory, benchmarks/metadata_heavy.py); the analysis is the same either way."""
    from advisor.load import xplane_stream
    from conftest import analyze_json
    fixture = FIXTURES / "gpu_data_parallel"
    expected = analyze_json(fixture)["runs"]
    monkeypatch.setattr(xplane_stream, "BIG_TABLE", 3)
    proc = cli("analyze", fixture, "--format", "json", "--jobs", "1")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["runs"] == expected


def test_name_table_keeps_the_last_of_equal_ids():
    import numpy as np

    from advisor.load.xplane_stream import _Names
    names = _Names()
    names.small = None
    names.add([(5, "a"), (2, "b"), (5, "c"), (9, "\udcff")])
    table = names.table()
    assert (table.get(5), table.get(2), table.get(7, ""), table.get(9)) == ("c", "b", "", "\ufffd\ufffd\ufffd")
    assert isinstance(table._ids, np.ndarray)


def test_fuzzed_options_configs_side_files_and_baselines_never_end_in_a_traceback():
    """A few of benchmarks/fuzz_inputs.py's cases (the benchmark runs 10,000 of each)."""
    import sys
    sys.path.insert(0, str(FIXTURES.parent / "benchmarks"))
    import fuzz_inputs
    out = fuzz_inputs.run(40, ["options", "config", "side", "baseline"], seed=7, verbose=False)
    assert not out["failures"], out["failures"][:3]
    assert all(c["ok"] for c in out["counts"].values())


def test_a_percent_sign_in_setup_cfg_is_a_percent_sign(tmp_path):
    (tmp_path / "setup.cfg").write_text("[advisor]\nselect = host-bound\nhost-bound.min_idle_share = 50%\n")
    line = one_line(cli("analyze", SCAN, cwd=tmp_path))
    assert "'50%'" in line and "Interpolation" not in line


def test_save_html_never_writes_into_a_run_it_read(run):
    import advisor
    from advisor.errors import AdvisorError
    report = advisor.analyze(run)
    xplane = next(run.rglob("*.xplane.pb"))
    for target in (xplane, xplane.parent / "report.html"):
        with pytest.raises(AdvisorError, match="save_html"):
            report.save_html(target)
    assert report.save_html(run.parent / "report.html").is_file()
