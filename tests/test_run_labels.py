"""Runs named by the workload and the settings that differ (advisor_run.json), not by timestamps
alone: the fleet table, compare (text, JSON, HTML), the run's own summary. The TensorBoard run picker
and serve's index: tests/test_tensorboard_app.py."""

import json
import shutil

from advisor import run_label
from conftest import FIXTURES, cli

SWEEP = ("transformer_scan", "transformer_remat", "transformer_remat_block", "transformer_unrolled")


def test_the_fleet_table_names_each_run_by_what_it_ran(tmp_path):
    for name in SWEEP:
        shutil.copytree(FIXTURES / name, tmp_path / name)
    text = cli("analyze", tmp_path).stdout
    table = text[text.index("fleet: 4 runs"):]
    assert table.count("transformer (tiny)") == 4, table
    for shown in ("model.remat=none", "model.remat=MLP+Attn", "model.remat=Block", "model.scan_layers=false",
                  "model.scan_layers=true"):      # the keys that vary, each with its value in every run
        assert shown in table, table
    assert "train.steps" not in table          # the same in every run: it tells none apart
    assert "workload      transformer (preset tiny) model.remat=MLP+Attn train.steps=2," in text


def test_compare_says_what_ran_on_each_side_and_what_changed(tmp_path):
    base, new = FIXTURES / "transformer_scan", FIXTURES / "transformer_remat"
    text = cli("compare", base, new).stdout
    assert text.splitlines()[:3] == ["base: transformer (tiny) train.steps=2",
                                     "new: transformer (tiny) model.remat=MLP+Attn train.steps=2",
                                     "changed: model.remat: none -> MLP+Attn"]
    assert "step time: faster beyond the measured noise (x0.846, noise 13%)" in text
    pair = json.loads(cli("compare", base, new, "--format", "json").stdout)["pairs"][0]
    assert pair["config_changes"] == ["model.remat: none -> MLP+Attn"]
    assert pair["step_time_verdict"] == "step time: faster beyond the measured noise (x0.846, noise 13%)"
    assert cli("compare", base, new, "--format", "html", "--output", tmp_path / "c.html").returncode == 0
    page = (tmp_path / "c.html").read_text(encoding="utf-8")
    assert "changed: model.remat: none -&gt; MLP+Attn" in page and "faster beyond the measured noise" in page
    same = cli("compare", base, base).stdout
    assert "changed: no setting (the same configuration on both sides)" in same
    assert "step time: within the measured noise (x1.000, noise 3%)" in same


def test_labels_keep_what_tells_runs_apart_and_treat_the_file_as_data(tmp_path):
    meta = json.loads(next((FIXTURES / "transformer_remat").rglob("advisor_run.json")).read_text())
    info = run_label.run_info(meta)
    assert run_label.label(info) == "transformer (tiny) model.remat=MLP+Attn train.steps=2"
    other = run_label.run_info({**meta, "config": {**meta["config"], "model": {**meta["config"]["model"],
                                                                              "remat": ["Block"]}}})
    assert run_label.labels([info, other, None]) == ["transformer (tiny) model.remat=MLP+Attn",
                                                     "transformer (tiny) model.remat=Block", ""]
    assert run_label.labels([info]) == ["transformer (tiny) model.remat=MLP+Attn train.steps=2"]
    # a stranger's file: an unknown workload has no settings; a long value is cut; a huge file is not read
    assert run_label.run_info({"workload": "mine", "preset": "x", "config": {"a": {"b": 1}}})["settings"] == {}
    long = run_label.run_info({**meta, "config": {**meta["config"], "model": {**meta["config"]["model"],
                                                                             "dtype": "x" * 500}}})
    assert len(long["settings"]["model.dtype"]) == run_label.MAX_VALUE
    big = tmp_path / "advisor_run.json"
    big.write_text(json.dumps({**meta, "pad": "x" * (run_label.MAX_METADATA + 1)}))
    assert run_label.read(big) is None and run_label.read(tmp_path / "absent.json") is None
    (tmp_path / "bad.json").write_text("[" * 100_000)
    assert run_label.read(tmp_path / "bad.json") is None


def test_a_sweep_run_names_the_keys_it_varied_even_at_their_default():
    """A sweep's default row (model.remat=none, the preset's value) named nothing: its advisor_run.json
    records the sweep's varied keys, and its settings name them whatever their value."""
    meta = json.loads(next((FIXTURES / "transformer_scan").rglob("advisor_run.json")).read_text())
    assert "model.remat" not in run_label.settings(meta)
    swept = {**meta, "sweep": {"varied": ["model.remat", "model.no_such_key", 7]}}
    assert run_label.settings(swept)["model.remat"] == "none"
    assert "model.no_such_key" not in run_label.settings(swept)
    assert run_label.settings({**meta, "sweep": {"varied": "model.remat"}}) == run_label.settings(meta)
