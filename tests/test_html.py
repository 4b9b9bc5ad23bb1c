"""The HTML report as a person sees it: rendered by headless Chromium, offline."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

import advisor

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="module")
def report():
    return advisor.analyze(ROOT / "fixtures" / "transformer_scan")


@pytest.fixture(scope="module")
def page(report, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("html")
    path = report.save_html(tmp / "report.html")
    return path, tmp


def chromium(tmp: Path, *args: str) -> subprocess.CompletedProcess:
    if not CHROMIUM:
        pytest.skip("chromium is not installed (Debian: apt-get install chromium)")
    return subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={tmp / 'profile'}", *args],
                          capture_output=True, text=True, timeout=120)


def test_self_contained_and_small(page):
    text = page[0].read_text()
    assert len(text.encode()) < 1_000_000
    # docs/html-report.md says "about 100 KB" for this fixture's report
    assert 70_000 < len(text.encode()) < 130_000, len(text.encode())
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", text)
    assert "<script" not in text and "@import" not in text
    assert not re.search(r"url\((?!#)", text)        # only references inside the page
    assert "@media print" in text


def test_rendered_dom_has_every_finding_and_plot(page, report):
    path, tmp = page
    netlog = tmp / "net.json"
    out = chromium(tmp, f"--log-net-log={netlog}", "--dump-dom", path.as_uri())
    dom = out.stdout
    import html
    findings = report.runs[0].findings
    assert findings
    for f in findings:
        assert f'id="rule-{f.rule}"' in dom
        assert html.escape(f.title) in dom
    assert dom.count("<svg") >= 4                  # step time, categories, memory by kind, largest buffers
    assert dom.count("<table") >= dom.count("<svg")   # every chart has its numbers as text
    assert page_requests(netlog) == []


def page_requests(netlog: Path) -> list[str]:
    """URLs the page asked for beyond file:// (Chromium's own background requests, initiated by
    "not an origin", are not the page's)."""
    log = json.loads(netlog.read_text())
    start = log["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
    jobs = [e.get("params", {}) for e in log["events"] if e["type"] == start]
    return [p["url"] for p in jobs if "url" in p and p.get("initiator") != "not an origin"
            and not p["url"].startswith("file:")]


def test_the_network_check_can_fail(page):
    """A page with one external image: the same check sees the request."""
    path, tmp = page
    bad = tmp / "bad.html"
    bad.write_text(path.read_text().replace("</body>", '<img src="http://example.invalid/x.png"></body>'))
    netlog = tmp / "bad-net.json"
    chromium(tmp, f"--log-net-log={netlog}", "--dump-dom", bad.as_uri())
    assert page_requests(netlog) == ["http://example.invalid/x.png"]


def test_screenshot(page):
    path, tmp = page
    shot = tmp / "report.png"
    chromium(tmp, f"--screenshot={shot}", "--window-size=1280,1600", path.as_uri())
    assert shot.is_file() and shot.stat().st_size > 10_000


def test_compare_and_cli_html(tmp_path):
    from click.testing import CliRunner

    from advisor.cli import main

    out = tmp_path / "compare.html"
    res = CliRunner().invoke(main, ["compare", str(ROOT / "fixtures" / "transformer_scan"),
                                    str(ROOT / "fixtures" / "transformer_remat"), "--format", "html",
                                    "--output", str(out)])
    assert res.exit_code == 0, res.output
    text = out.read_text()
    assert "<svg" in text and "new / base" in text
    res = CliRunner().invoke(main, ["analyze", str(ROOT / "fixtures" / "transformer_scan"), "--format", "html"])
    assert res.exit_code == 2 and "--output" in res.output


def test_verify_before_after_and_device_charts(report):
    """After `run-workload --verify` a finding carries its measured before/after (verify.py's shape);
    a GPU trace adds per-device time by category with busy and idle time."""
    import copy

    verified = copy.deepcopy(report)
    verified.runs[0].findings[0].verified = {
        "change": {"model.scan_layers": False}, "promised": "step_time", "improved": True,
        "step_time_ms": [205.8, 150.2], "step_time_ratio": 0.7298, "step_time_noise": 0.03,
        "peak_memory_bytes": [122202841, 120000000], "peak_memory_ratio": 0.982}
    text = verified.to_html()
    assert "verify of scan-dynamic-update-slice: improved" in text and "150.2" in text
    assert text.count("<svg") == report.to_html().count("<svg") + 1
    gpu = advisor.analyze(ROOT / "fixtures" / "gpu_h2d_idle").to_html()
    assert "idle in the steps" in gpu and "/device:GPU:0: time by category, in the traced window" in gpu
    # the after bar is green only where it is lower: step time better (green), memory worse (red)
    verified.runs[0].findings[0].verified["peak_memory_bytes"] = [120000000, 122202841]
    text = verified.to_html()
    at = text.index("verify of scan-dynamic-update-slice")
    section = text[text.rfind("<svg", 0, at):at]
    assert "#27ae60" in section and "#c0392b" in section
    worse = copy.deepcopy(verified)
    worse.runs[0].findings[0].verified["step_time_ms"] = [150.2, 205.8]
    page = worse.to_html()
    at = page.index("verify of scan-dynamic-update-slice")
    assert "#27ae60" not in page[page.rfind("<svg", 0, at):at]


def test_a_verdict_and_an_expected_gain_read_as_in_the_text_report():
    """The verdict's `advisor calibrate` is code, not raw backticks; the expected gain is the text's,
    with no figure appended to it (a finding read 'about 76.3 MiB less ... (76.6 MiB)')."""
    from advisor.report.html import _finding, run_section

    doc = {"path": "r", "backend": "cpu", "device": "cpu", "findings": [], "notes": [], "warnings": [],
           "rules": {"ran": ["host-bound"]},
           "summary": {"step_time_ms": 1.0, "steps": 1, "efficiency": {"verdict": "unknown: run `advisor calibrate`"}}}
    page = run_section(doc, [])
    assert "<code>advisor calibrate</code>" in page and "`" not in page
    finding = {"rule": "missing-remat", "severity": "info", "title": "t", "evidence": {"big": 12345678.0},
               "recommendation": {"text": "x", "cost": "c", "expected": {"text": "about 76.3 MiB less peak memory",
                                                                         "saving": 80000000, "unit": "bytes"}}}
    html = _finding(finding)
    assert "about 76.3 MiB less peak memory</dd>" in html and "12,350,000" in html and "e+07" not in html


def test_rendering_leaves_the_users_matplotlib_settings_alone(report):
    import matplotlib

    before = dict(matplotlib.rcParams)
    report.to_html()
    assert dict(matplotlib.rcParams) == before


def test_the_same_input_gives_the_same_file():
    """Byte for byte: matplotlib's SVG ids come from a fixed salt, and no date is written."""
    import advisor

    first = advisor.analyze(str(ROOT / "fixtures" / "transformer_scan")).to_html()
    assert first == advisor.analyze(str(ROOT / "fixtures" / "transformer_scan")).to_html()


def test_code_spans_are_code_not_backticks():
    from advisor.report.html import _prose

    assert _prose("use `jax.jit(f)` here") == "use <code>jax.jit(f)</code> here"
    assert _prose("a `<b>` tag") == "a <code>&lt;b&gt;</code> tag"      # data inside is escaped
    assert _prose("one ` alone") == "one ` alone"


def test_compare_page_shows_formatted_figures():
    """Ratios as x0.84, the noise as a percentage, ms with two decimals: never a raw float."""
    import re

    from advisor.compare import compare, metrics
    from advisor.engine import analyze_path
    from advisor.report.html import render_compare

    (base,), (new,) = (analyze_path(ROOT / "fixtures" / "transformer_scan"),
                       analyze_path(ROOT / "fixtures" / "transformer_remat"))
    page = render_compare([("run", compare(metrics(base.document()), metrics(new.document())))], "base", "new")
    assert re.search(r"<td>x\d+\.\d\d</td>", page) and re.search(r"noise \(relative spread\): \d+\.\d%", page)
    assert not re.search(r"<td>\d+\.\d{3,}</td>", page)


def test_compare_page_has_the_mfu_row_the_text_compare_prints():
    """The HTML compare dropped the MFU row (and its peak) that the text compare prints."""
    from advisor.compare import compare, metrics
    from advisor.engine import analyze_path
    from advisor.report.html import render_compare

    h100 = ROOT / "fixtures" / "h100-traces"
    (base,), (new,) = (analyze_path(h100 / "transformer_seed"),
                       analyze_path(h100 / "transformer_seed_no_command_buffers"))
    c = compare(metrics(base.document()), metrics(new.document()))
    page = render_compare([("run", c)], "base", "new")
    assert "<tr><td>MFU</td><td>21.4%</td><td>21.0%</td><td>x0.98</td></tr>" in page
    assert "MFU against NVIDIA H100 SXM bf16 (NVIDIA H100 Tensor Core GPU data sheet (2023)" in page
    (scan,) = analyze_path(ROOT / "fixtures" / "transformer_scan")     # CPU, no peak given: no MFU row
    assert "<td>MFU</td>" not in render_compare([("run", compare(metrics(scan.document()),
                                                                 metrics(scan.document())))], "a", "b")


def test_equal_largest_buffers_are_said_in_a_line_not_drawn_as_equal_bars():
    """On the seed trace the ten largest buffers are all 192 MiB: ten equal bars with cut labels said
    nothing; a line says it, and the table beside it names each buffer."""
    from advisor.engine import analyze_path
    from advisor.report.html import render_report

    (seed,) = analyze_path(ROOT / "fixtures" / "h100-traces" / "transformer_seed")
    page = render_report([seed.document()], "seed")
    assert "the 10 largest buffers live at the peak are all 192.0 MiB" in page
    assert 'aria-label="largest buffers"><figure>' not in page
    (scan,) = analyze_path(ROOT / "fixtures" / "transformer_scan")     # sizes that differ: drawn
    drawn = render_report([scan.document()], "scan")
    assert "largest buffers live at the peak are all" not in drawn and 'aria-label="largest buffers"><figure>' in drawn
