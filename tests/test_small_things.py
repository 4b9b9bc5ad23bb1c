"""What a newcomer reads: `advisor explain` rendered on a terminal, one convention for units (memory
in MiB up to 1 GiB then GiB, µs, SI prefixes on rates), no "(no steps) (...)", and the bundled
workloads' source lines by their package path."""

import io
import re

from rich.console import Console

from advisor.report import explain_text
from advisor.rules import select
from advisor.sources import shown
from advisor.units import mib, si
from conftest import FIXTURES, GPU_TRACES, cli


def test_explain_renders_markdown_on_a_terminal_and_prints_it_plain_when_piped():
    doc = select(["missing-remat"])[0].doc
    buf = io.StringIO()
    explain_text.render(doc, Console(file=buf, force_terminal=True, width=100), True)
    shown_text = re.sub(r"\x1b\[[0-9;]*m", "", buf.getvalue())
    assert "What it does" in shown_text and "## " not in shown_text and "`" not in shown_text
    assert cli("explain", "missing-remat").stdout == doc.strip() + "\n"      # piped: the source


def test_sizes_and_rates_have_one_convention():
    assert mib(116.5 * 2**20) == "116.5 MiB" and mib(81_090.1 * 2**20) == "79.2 GiB"
    assert mib(5.78 * 2**30) == "5.78 GiB" and mib(2048) == "2.0 KiB"
    assert si(2.34e4, "FLOP/s") == "23.4 kFLOP/s" and si(3.08e12, "B/s") == "3.08 TB/s"
    assert si(999.96e9, "B/s") == "1 TB/s" and si(989e12, "FLOP/s") == "989 TFLOP/s"


def test_a_gpu_report_keeps_one_unit_per_quantity():
    text = cli("analyze", GPU_TRACES / "tf_bert_v100_multiworker").stdout
    assert not re.search(r"\d us\b", text) and "µs" in text
    assert not re.search(r"\d[\d,]{4,}\.\d MiB", text), "a size of 10,000 MiB or more is in GiB"
    assert "GiB" in text and not re.search(r"\de[+-]\d", text)
    assert "(no steps) (" not in text and "which has no steps" in text


def test_bundled_workload_sources_are_shown_by_package_path():
    doc = cli("analyze", FIXTURES / "transformer_scan").stdout
    sources = re.findall(r"source:\s+(\S+)", doc)
    assert sources and all(re.fullmatch(r"advisor/workloads/\w+\.py:\d+", s) for s in sources), sources
    assert "allocated at advisor/runner.py:" in doc
    installed = "/home/u/.venv/lib/python3.11/site-packages/advisor/workloads/transformer.py:92"
    assert shown(installed, False) == "advisor/workloads/transformer.py:92"
    # a user's own file keeps its path, even in a folder named workloads/
    assert shown("/home/u/proj/workloads/transformer.py:7", False) == "/home/u/proj/workloads/transformer.py:7"
    assert shown("/home/u/proj/train.py:7 step", True) == "/home/u/proj/train.py:7 step"


def test_numbers_never_print_an_exponent_and_large_ones_have_separators():
    from advisor.units import flop, sig
    assert [sig(x) for x in (2734.2, 0.98712, 38012.4, 999.7, 2.2, 0.0012345)] == \
        ["2,730", "0.987", "38,000", "1,000", "2.2", "0.00123"]
    assert flop(2.2e12) == "2.2 TFLOP"
    text = cli("analyze", FIXTURES / "h100-traces" / "transformer_seed").stdout
    assert not re.search(r"\de[+-]\d", text)
    assert not re.search(r"\d{4,}\.\d+ (ms|µs)", text), "1,000 ms and more have separators"
    # the device plane's totals are over the traced window, and say so; a delay of over 1 ms is in ms
    assert re.search(r"in the traced window: 16,518 kernels, 452\.66 ms", text)
    # every launch of the seed step queued behind earlier work: the host's lead, not a launch latency
    assert ("330 of 330 launches queued behind earlier work: the host ran ahead of the device by 67.72 ms "
            "(median), not launch latency") in text
    assert "launch to start" not in text and "the host's launch call 107.4 µs (median)" in text
    one_by_one = cli("analyze", FIXTURES / "h100-traces" / "transformer_seed_no_command_buffers").stdout
    # 39 kernels launched after the device had finished the work ahead of them: the launch's own overhead
    assert ("launch overhead 9.6 µs to start on an idle device (median of 39 launches); the host's launch call "
            "4.8 µs (median); 15,507 of 15,546 launches queued behind earlier work") in one_by_one
    gemm = cli("analyze", FIXTURES / "h100-traces" / "gemm_bf16_8192").stdout
    assert re.search(r"custom-call\.1 .* 2,730 ", gemm), "FLOP/B is a plain number"
