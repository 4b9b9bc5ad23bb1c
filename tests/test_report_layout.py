"""The terminal report fits the terminal and never cuts a number; piped, in a file or in a CI log it
is plain lines: unwrapped, unpadded, no box drawing (advisor/report/layout.py)."""

import io
import re

import pytest

from advisor.report import check_text, layout, text
from conftest import FIXTURES, analyze_json, cli

BOX = re.compile("[\u2500-\u257f]")
ANSI = re.compile(r"\x1b\[[0-9;]*m")


@pytest.fixture(scope="module")
def scan_doc():
    return analyze_json(FIXTURES / "transformer_scan", "--peak-flops", "200G", "--peak-bandwidth", "20GB/s")["runs"][0]


def _on_terminal(doc, width: int) -> list[str]:
    out = io.StringIO()
    text.render([{"run": doc}], layout.console(out, terminal=True, width=width))
    return [ANSI.sub("", line) for line in out.getvalue().splitlines()]


def _numbers(doc) -> list[str]:
    """The figures of the category table, as the report prints them."""
    return [f"{c['time_per_step_s'] * 1e3:.2f} ms" for c in doc["summary"]["efficiency"]["categories"]]


def test_piped_output_is_plain_lines():
    out = cli("analyze", FIXTURES / "transformer_scan", "--peak-flops", "200G", "--peak-bandwidth", "20GB/s").stdout
    lines = out.splitlines()
    assert not [line for line in lines if line != line.rstrip()], "trailing spaces"
    assert not BOX.search(out), "box drawing in piped output"
    # nothing wrapped: each finding's fix is one line, whatever its length
    fixes = [line for line in lines if line.startswith("    fix:")]
    assert fixes and max(len(line) for line in fixes) > 160
    head = next(i for i, line in enumerate(lines) if line.startswith("op time by category"))
    assert lines[head + 1].split()[:4] == ["category", "time", "per", "step"]


@pytest.mark.parametrize("width", [80, 100, 60])
def test_the_report_fits_the_terminal_and_keeps_every_number(scan_doc, width):
    lines = _on_terminal(scan_doc, width)
    assert max(len(line.rstrip()) for line in lines) <= width
    joined = "\n".join(lines)
    assert "…" not in joined, "a cell was cut"
    for figure in _numbers(scan_doc):
        assert figure in joined, f"{figure} cut or wrapped at {width} columns"


def test_a_narrow_terminal_leaves_out_columns_then_stacks_rows(scan_doc):
    lines = _on_terminal(scan_doc, 80)
    assert any(line.startswith("(left out to fit 80 columns:") for line in lines)
    narrow = "\n".join(_on_terminal(scan_doc, 40))
    assert "…" not in narrow
    # stacked: each category on a line of its own, its figures under it
    assert re.search(r"^copy/dynamic-update-slice\n  time per step +38\.32 ms", narrow, re.M)


def test_check_lines_are_not_wrapped():
    out = cli("check", FIXTURES / "transformer_scan", "--baseline", FIXTURES / "baselines" / "transformer_remat.json")
    lines = out.stdout.splitlines()
    assert out.returncode == 1
    fail = [line for line in lines if line.startswith("FAIL  rule:scan-dynamic-update-slice")]
    assert len(fail) == 1 and "(new since the baseline)" in fail[0] and fail[0].endswith(".py:142)")
    assert all(re.match(r"(FAIL|pass|WARN) |advisor check", line) for line in lines), lines


def test_check_fits_the_terminal_at_words():
    class Check:
        name, passed, level, source = "rule:x", False, "error", None
        message = "a long message " * 12

    class Result:
        checks, passed = [Check()], False

    out = io.StringIO()
    check_text.render(Result(), layout.console(out, terminal=True, width=50))
    lines = [ANSI.sub("", line).rstrip() for line in out.getvalue().splitlines()]
    assert max(map(len, lines)) <= 50 and all(line.endswith(("message", "long", "a", "failed")) for line in lines)


@pytest.mark.parametrize("terminal", [False, True])
def test_a_label_as_wide_as_its_column_keeps_a_space(scan_doc, terminal):
    """The out-of-memory report printed "candidate:--set model.dtype=bfloat16": its label fills the
    10 columns of the labels."""
    import copy

    doc = copy.deepcopy(scan_doc)
    oom = copy.deepcopy(doc["findings"][0])
    oom.update(rule="out-of-memory", severity="error", title="the step does not fit")
    oom["evidence"] = {"candidates": [{"change": {"model.dtype": "bfloat16"}, "estimated_bytes": 125 << 20,
                                       "fits": False}]}
    doc["findings"] = [oom]
    out = io.StringIO()
    text.render([{"run": doc}], layout.console(out, terminal=terminal, width=120))
    lines = ANSI.sub("", out.getvalue()).splitlines()
    assert "    candidate: --set model.dtype=bfloat16" in [line[:41] for line in lines], lines
    fix = next(line for line in lines if line.startswith("    fix:"))
    assert re.match(r"    fix: +\S", fix)


def test_stacked_rows_leave_out_empty_cells():
    """A fleet at 80 columns stacks its rows: a run with no errors has no `errors` line."""
    out = io.StringIO()
    con = layout.console(out, terminal=True, width=40)
    cols = [layout.Col("run", wrap=True), layout.Col("errors", number=True), layout.Col("step time", number=True),
            layout.Col("rules that fired", wrap=True)]
    layout.table(con, "fleet", cols, [["a/very/long/run/name/that/does/not/fit", "", "12,345.67 ms", "x"] * 1])
    plain = ANSI.sub("", out.getvalue())
    assert "step time" in plain and "12,345.67 ms" in plain and "errors" not in plain


@pytest.mark.parametrize("width", [80, 100])
def test_advisor_rules_fits_a_narrow_terminal_without_cutting_a_word(width, monkeypatch):
    """`advisor rules` at 80 columns: each rule a heading line (id, severity, backends) and its summary
    beneath, wrapped at spaces: every word of every summary whole, no line wider than the terminal."""
    from click.testing import CliRunner

    from advisor import cli as cli_module
    from advisor import rules as catalog

    made = layout.console
    monkeypatch.setattr(layout, "console", lambda file=None, terminal=None, w=None: made(file, True, width))
    out = ANSI.sub("", CliRunner().invoke(cli_module.main, ["rules"]).output)
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= width
    words = out.split()
    for rule in catalog.ALL:
        assert rule.id in words
        for word in rule.summary.split():
            assert word in words, (rule.id, word)
    assert len(lines) <= 3 * len(catalog.ALL) + 2, len(lines)
