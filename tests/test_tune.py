"""`advisor tune`: the settings the findings name, searched together; rows that cannot fit never run."""


from conftest import FIXTURES, cli
from test_json_schema import validate


def test_the_findings_name_the_axes_with_their_neutral_values():
    """On the tiny Transformer (scan, no remat) the findings name scan_layers (unroll) and remat (remat, and
    remat inside the scan): each axis holds the current value, the proposed ones and the neutral one, so
    the grid holds "unrolled, no remat" and "scan with remat", which no single finding proposes together."""
    import advisor
    from advisor.tune import named_settings, vary_items

    (run,) = advisor.analyze(FIXTURES / "transformer_scan").runs
    config = run.profile.run_metadata["config"]
    axes = named_settings(run.findings, config)
    assert axes["model.scan_layers"] == [True, False]
    assert axes["model.remat"] == [[], ["MLP", "Attn"]]
    assert sorted(vary_items(axes)) == ["model.remat=none,MLP+Attn", "model.scan_layers=true,false"]


def test_rows_that_do_not_fit_are_compiled_never_run(tmp_path):
    proc = cli("tune", "transformer", "--vary", "model.remat=none,MLP+Attn", "--device-memory", "80MB",
               "--budget", "30", "--logdir", tmp_path, "--format", "json")
    doc = validate("tune", proc)
    rows = {r["config"]: r for r in doc["rows"]}
    heavy, light = rows["model.remat=none"], rows["model.remat=MLP+Attn"]
    assert heavy["fits"] is False and heavy["peak_memory_bytes"] > 80_000_000 and heavy["step_time_ms"] is None
    assert light["fits"] is True and light["peak_memory_bytes"] <= 80_000_000
    assert doc["best"]["config"] == "model.remat=MLP+Attn" and doc["best"]["set"] == ["model.remat=MLP+Attn"]
    assert not list(tmp_path.rglob("*.xplane.pb")), "--vary searches without profiling; nothing that cannot fit runs"
