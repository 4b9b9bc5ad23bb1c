"""The analyze path stays light: no jax, flax, optax, TensorFlow or xprof imported to read a trace,
run the rules and render; and the tables that replaced those imports agree with their sources."""

import subprocess
import sys

from conftest import FIXTURES

HEAVY = ("jax", "jaxlib", "flax", "optax", "tensorflow", "xprof", "ray")

# Run in a fresh interpreter: this test process has jax imported already.
_PROBE = """
import sys
from click.testing import CliRunner
from advisor.cli import main
args = sys.argv[1:]
result = CliRunner().invoke(main, args)
assert result.exit_code == 0, (result.exit_code, result.output, result.exception)
heavy = sorted(m for m in sys.modules if m.split(".")[0] in {heavy!r})
print("HEAVY", " ".join(heavy))
"""


def _heavy_modules_after(*args) -> list[str]:
    out = subprocess.run([sys.executable, "-c", _PROBE.format(heavy=set(HEAVY)), *map(str, args)],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    line = [text for text in out.stdout.splitlines() if text.startswith("HEAVY")][-1]
    return line.split()[1:]


def test_analyze_imports_no_jax():
    # A bundled workload's trace: its findings carry `--set` config changes, read from the
    # workload's config surface (workloads/*_spec.py), not from the modules that build the model.
    assert _heavy_modules_after("analyze", FIXTURES / "transformer_scan", "--format", "json") == []


def test_analyze_of_a_gpu_trace_imports_no_jax():
    assert _heavy_modules_after("analyze", FIXTURES / "gpu_scan") == []


def test_element_types_table_matches_jaxlib():
    from jax._src.lib import xla_client

    from advisor.load.element_types import ELEMENT_TYPES, TUPLE, derive

    assert ELEMENT_TYPES == derive(), "regenerate the table: python -m advisor.load.element_types"
    assert TUPLE == int(xla_client.PrimitiveType.TUPLE)


def test_workload_specs_are_the_workloads_config_surface():
    from advisor import workloads
    from advisor.workloads import mlp, mlp_spec, transformer, transformer_spec

    assert transformer.SCHEMA is transformer_spec.SCHEMA and transformer.PRESETS is transformer_spec.PRESETS
    assert mlp.SCHEMA is mlp_spec.SCHEMA and mlp.remedy_config is mlp_spec.remedy_config
    assert workloads.get("transformer") is transformer
