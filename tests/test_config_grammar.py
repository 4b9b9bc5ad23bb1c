"""One grammar for a set value wherever it is given: `--set`, `--vary`, `check --workload`, the
API's dicts, the project's select/ignore: items joined by `+`, `none` for the empty set; what
advisor prints (`config: --set ...`) reads back the same everywhere."""

import json

import pytest

import advisor
from advisor import workloads
from advisor.errors import AdvisorError
from advisor.sweep import grid, label
from advisor.workloads.config import ConfigError, format_value
from conftest import FIXTURES, cli

SCAN = FIXTURES / "transformer_scan"


@pytest.mark.parametrize("text, remat", [("none", ()), ("", ()), ("MLP+Attn", ("MLP", "Attn")),
                                         ("Attn+MLP", ("MLP", "Attn")), ("MLP,Attn", ("MLP", "Attn")),
                                         ("Block", ("Block",))])
def test_set_takes_none_and_plus(text, remat):
    assert workloads.resolve("transformer", "tiny", [f"model.remat={text}"])["model"]["remat"] == remat


@pytest.mark.parametrize("text", ["MLP++Attn", "MLP+", "none+MLP", "Layer"])
def test_a_bad_set_is_refused_with_the_grammar(text):
    with pytest.raises(ConfigError, match=r"joined by '\+'.*or none"):
        workloads.resolve("transformer", "tiny", [f"model.remat={text}"])


def test_every_printed_value_reads_back_as_itself():
    """format_value (what `config: --set` prints) parses to the same value for every field of
    every preset of both workloads."""
    for name in workloads.NAMES:
        spec = workloads._spec(name)
        for preset in spec.PRESETS:
            config = workloads.resolve(name, preset, [])
            items = [f"{s}.{k}={format_value(v)}" for s, fields in config.items() for k, v in fields.items()]
            assert workloads.resolve(name, preset, items) == config
    assert format_value(()) == "none" and format_value(["MLP", "Attn"]) == "MLP+Attn"


def test_the_api_dict_is_read_in_the_same_grammar_and_checked():
    config = workloads.resolve("transformer", "tiny", {"model.remat": "MLP+Attn", "train.donate": False})
    assert config["model"]["remat"] == ("MLP", "Attn") and config["train"]["donate"] is False
    assert workloads.resolve("transformer", "tiny", {"model.remat": ["Attn", "MLP"]})["model"]["remat"] == \
        ("MLP", "Attn")
    assert workloads.resolve("transformer", "tiny", {"model.remat": None})["model"]["remat"] == ()
    for bad in ({"model.remat": ["Bogus"]}, {"model.num_layers": 2.5}, {"train.donate": "maybe"}):
        with pytest.raises(ConfigError):
            workloads.resolve("transformer", "tiny", bad)


def test_vary_rows_are_the_set_grammar_and_labelled_as_written():
    rows = grid("transformer", "tiny", ["train.steps=2"], ["model.remat=none,MLP+Attn,Block"])
    assert [label(r, ["train.steps=2"]) for r in rows] == ["model.remat=none", "model.remat=MLP+Attn",
                                                          "model.remat=Block"]
    remats = [workloads.resolve("transformer", "tiny", r)["model"]["remat"] for r in rows]
    assert remats == [(), ("MLP", "Attn"), ("Block",)]
    # commas separate rows: three single-module rows, and their labels say so
    rows = grid("transformer", "tiny", [], ["model.remat=none,MLP,Attn"])
    assert [label(r, []) for r in rows] == ["model.remat=none", "model.remat=MLP", "model.remat=Attn"]
    with pytest.raises(AdvisorError, match="write 'none'"):
        grid("transformer", "tiny", [], ["model.remat=MLP,,Attn"])


def fired(proc):
    assert proc.returncode == 0, proc.stderr
    return {f["rule"] for f in json.loads(proc.stdout)["runs"][0]["findings"]}


def test_select_and_ignore_take_the_same_grammar(tmp_path):
    assert fired(cli("analyze", SCAN, "--format", "json", "--select", "missing-remat+float32-activations")) == \
        {"missing-remat", "float32-activations"}
    assert fired(cli("analyze", SCAN, "--format", "json", "--select", "none")) == set()
    (tmp_path / "pyproject.toml").write_text('[tool.advisor]\nignore = "missing-remat+float32-activations"\n')
    assert fired(cli("analyze", SCAN, "--format", "json", cwd=tmp_path)) == {"scan-dynamic-update-slice"}
    (tmp_path / "pyproject.toml").write_text('[tool.advisor]\nselect = "none"\n')
    assert fired(cli("analyze", SCAN, "--format", "json", cwd=tmp_path)) == set()
    (tmp_path / "pyproject.toml").write_text('[tool.advisor]\nignore = "none"\n')
    assert "missing-remat" in fired(cli("analyze", SCAN, "--format", "json", cwd=tmp_path))
    report = advisor.analyze(SCAN, select="missing-remat+scan-dynamic-update-slice")
    assert {f.rule for f in report.runs[0].findings} == {"missing-remat", "scan-dynamic-update-slice"}
    assert advisor.analyze(SCAN, select="none").runs[0].findings == []


def test_printed_config_is_in_the_grammar():
    doc = json.loads(cli("analyze", SCAN, "--format", "json").stdout)
    text = cli("analyze", SCAN).stdout
    assert any(f["recommendation"]["config"].get("model.remat") == ["MLP", "Attn"] for f in doc["runs"][0]["findings"])
    assert "config:   --set model.remat=MLP+Attn" in text and "MLP,Attn" not in text


def test_a_report_where_no_rule_ran_says_so_and_never_reads_clean(tmp_path):
    """`--select none` runs no rule: the report must not say that no rule saw a problem."""
    from conftest import FIXTURES, analyze_json, cli

    text = cli("analyze", FIXTURES / "transformer_scan", "--select", "none").stdout
    assert "No rule ran" in text and "nothing was checked" in text
    assert "none of the" not in text and "saw a problem" not in text
    doc = analyze_json(FIXTURES / "transformer_scan", "--select", "none")
    assert doc["runs"][0]["rules"]["ran"] == [] and doc["runs"][0]["findings"] == []
    out = tmp_path / "report.html"
    cli("analyze", FIXTURES / "transformer_scan", "--select", "none", "--format", "html", "--output", out)
    html = out.read_text()
    assert "No rule ran" in html and "no rule fired" not in html
