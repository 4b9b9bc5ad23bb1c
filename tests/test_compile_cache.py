"""The compilation cache of run-workload / sweep / check --workload / --verify: a second identical
run loads its programs and reports the same peak memory and findings; a trace of a program loaded
from a cache is read honestly (its HLO under a new id, its missing heap simulation said)."""

import json
import shutil

from advisor import compile_cache, rules
from advisor.heap_traces import _BUFFER_ASSIGNMENT, _HEAP_TRACES, _fields, restore
from advisor.load.hlo_proto import HloProto
from advisor.load.wire import encode_field as _field
from advisor.load.xplane import XPlane as _XPlane
from advisor.load.xplane import metadata_plane as _metadata_plane
from conftest import FIXTURES, analyze_json, cli


def _run(tmp_path, name, *extra):
    out = tmp_path / f"{name}.json"
    res = cli("run-workload", "mlp", "--set", "train.steps=2", "--logdir", tmp_path / name, "--format", "json",
              "--output", out, *extra)
    assert res.returncode == 0, res.stderr
    return json.loads(out.read_text())["runs"][0]


def test_a_second_run_loads_its_programs_and_reports_the_same(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv(compile_cache.ENV, "")      # restored after: the CLI sets it
    first = _run(tmp_path, "first")
    second = _run(tmp_path, "second")
    used = [r["summary"]["run"]["compile_cache"] for r in (first, second)]
    assert used[0]["directory"] == str(tmp_path / "cache" / "advisor" / "jax")
    assert used[0]["misses"] > 0 and used[1]["hits"] > 0 and used[1]["misses"] == 0
    assert second["summary"]["peak_memory_bytes"] == first["summary"]["peak_memory_bytes"]
    assert second["warnings"] == first["warnings"] == []
    hlo_rules = {r.id for r in rules.ALL if "hlo" in r.needs}
    assert [f for f in second["findings"] if f["rule"] in hlo_rules] == \
           [f for f in first["findings"] if f["rule"] in hlo_rules]
    assert any("persistent compilation cache" in n for n in second["notes"])


def test_estimates_are_kept_apart_from_traced_runs(tmp_path, monkeypatch):
    """A pre-flight / compile-check estimate loads its program the second time, with the same memory
    analysis, and a traced run of the same configuration afterwards never loads it: it compiles
    under the profiler, and its trace keeps the heap simulation (peak memory, no warning)."""
    from advisor import workloads
    from advisor.workload_memory import estimate_bytes

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv(compile_cache.ENV, str(tmp_path / "cache" / "advisor" / "jax"))
    config = workloads.resolve("mlp", "tiny", ["train.steps=2"])
    counts = compile_cache.counts()
    first = estimate_bytes("mlp", config)
    after_first = compile_cache.counts()
    second = estimate_bytes("mlp", config)
    after_second = compile_cache.counts()
    assert first == second and first > 0
    assert after_first["misses"] > counts["misses"] and after_second["misses"] == after_first["misses"]
    assert after_second["hits"] > after_first["hits"]
    assert list((tmp_path / "cache" / "advisor" / "jax" / "untraced").glob("*-cache"))
    run = _run(tmp_path, "traced")
    assert run["summary"]["run"]["compile_cache"]["hits"] == 0 and run["warnings"] == []
    assert run["summary"]["peak_memory_bytes"] > 0


def test_no_cache_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv(compile_cache.ENV, "")
    run = _run(tmp_path, "plain", "--no-cache")
    assert "compile_cache" not in run["summary"]["run"]
    assert not (tmp_path / "cache").exists()


def test_help_names_the_cache_directory():
    for command in ("run-workload", "sweep", "check"):
        res = cli(command, "--help")
        assert "--no-cache" in res.stdout and "advisor/jax" in res.stdout, command


def test_the_cache_follows_xdg(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert compile_cache.default_dir() == tmp_path / "advisor" / "jax"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert compile_cache.default_dir() == tmp_path / ".cache" / "advisor" / "jax"


def _as_loaded_from_cache(xplane, step_key, new_id):
    """The trace as a cache hit records it: the step's HLO under another program id, without heap traces."""
    data = xplane.read_bytes()
    start, body, end = _metadata_plane(data)
    plane = _XPlane()
    plane.ParseFromString(data[body:end])
    hlo_stat = next(k for k, v in plane.stat_metadata.items() if v.name == "Hlo Proto")
    id_stat = next(k for k, v in plane.stat_metadata.items() if v.name == "program_id")
    (key,) = [k for k, v in plane.event_metadata.items() if v.name == step_key]
    meta = plane.event_metadata[key]
    for stat in meta.stats:
        if stat.metadata_id == hlo_stat:
            parts = _fields(stat.bytes_value)
            stripped = b"".join(_field(f, v) for f, v in _fields(dict(parts)[_BUFFER_ASSIGNMENT]) if f != _HEAP_TRACES)
            hlo = HloProto()
            hlo.ParseFromString(b"".join(_field(f, stripped if f == _BUFFER_ASSIGNMENT else v) for f, v in parts))
            hlo.hlo_module.id = new_id      # the buffer assignment, undeclared there, is kept as it is
            stat.bytes_value = hlo.SerializeToString()
        elif stat.metadata_id == id_stat:
            kind = stat.WhichOneof("value")     # the program id: an unsigned or a signed integer
            assert getattr(stat, kind) == int(step_key[:-1].rsplit("(", 1)[1])
            setattr(stat, kind, new_id)
    moved = plane.event_metadata[new_id]
    moved.CopyFrom(meta)
    moved.id = new_id
    moved.name = f"{step_key.rsplit('(', 1)[0]}({new_id})"
    del plane.event_metadata[key]
    xplane.write_bytes(data[:start] + _field(1, plane.SerializeToString()) + data[end:])


def test_a_cache_hit_trace_is_read_honestly_and_restored(tmp_path):
    original = analyze_json(FIXTURES / "transformer_scan")["runs"][0]
    run = tmp_path / "run"
    shutil.copytree(FIXTURES / "transformer_scan", run)
    (xplane,) = run.rglob("*.xplane.pb")
    store = tmp_path / "jax"
    assert restore(xplane, store, "jit_train_step") == []       # compiled fresh: its heap traces are kept
    _as_loaded_from_cache(xplane, "jit_train_step(44)", 900)

    hit = analyze_json(run)["runs"][0]
    assert any("registered as jit_train_step(900)" in n for n in hit["notes"])
    assert any("no heap simulation" in w for w in hit["warnings"])
    assert hit["summary"].get("peak_memory_bytes") is None          # never the wrong peak
    assert {f["rule"] for f in hit["findings"]} == {"scan-dynamic-update-slice"}    # the HLO is read

    assert restore(xplane, store, "jit_train_step") == ["jit_train_step(900)"]
    fixed = analyze_json(run)["runs"][0]
    assert fixed["warnings"] == original["warnings"]
    assert fixed["summary"]["peak_memory_bytes"] == original["summary"]["peak_memory_bytes"]
    assert fixed["findings"] == original["findings"]


def test_cache_aliases_are_never_guessed():
    from advisor.load.loader import cached_program_aliases

    # jit_f(5) ran without HLO; the one jit_f no op names is it (jit_f(3) ran under its own id)
    assert cached_program_aliases(["jit_f(3)", "jit_f(7)"],
                                  {"jit_f(3)", "jit_f(5)", "memcpy"}) == {"jit_f(5)": "jit_f(7)"}
    assert cached_program_aliases(["jit_f(6)", "jit_f(7)"], {"jit_f(5)"}) == {}           # two, nothing to tell
    assert cached_program_aliases(["jit_f(7)"], {"jit_f(5)", "jit_f(6)"}) == {}           # two without HLO
    assert cached_program_aliases(None, {"jit_f(5)"}) == {}


def test_several_cached_programs_of_a_name_are_told_apart_by_their_instructions():
    from types import SimpleNamespace

    from advisor.load.loader import cached_program_aliases

    def proto(*names):
        hlo = HloProto()
        comp = hlo.hlo_module.computations.add()
        for name in names:
            comp.instructions.add().name = name
        return hlo.SerializeToString()

    protos = {"jit_f(6)": proto("dot.1", "add.2"), "jit_f(7)": proto("fusion.3", "copy.4", "add.2")}
    ops = [SimpleNamespace(name="fusion.3", module="jit_f(5)"), SimpleNamespace(name="add.2", module="jit_f(5)")]
    lookup = lambda keys: {k: v for k, v in protos.items() if k in keys}      # noqa: E731
    assert cached_program_aliases(["jit_f(6)", "jit_f(7)"], {"jit_f(5)"}, ops, lookup) == {"jit_f(5)": "jit_f(7)"}
    protos["jit_f(6)"] = proto("fusion.3", "add.2")       # both hold every op: not guessed
    assert cached_program_aliases(["jit_f(6)", "jit_f(7)"], {"jit_f(5)"}, ops, lookup) == {}


def test_a_fresh_program_without_temporaries_is_not_taken_for_a_cached_one(tmp_path):
    """`x * 2 + 1` has only its parameter and its output: XLA runs no heap simulation for it, freshly
    compiled or not. Its empty trace list is not the mark of a program loaded from the cache."""
    import jax
    import jax.numpy as jnp

    from advisor.engine import analyze_path

    step = jax.jit(lambda x: x * 2 + 1)
    with jax.profiler.trace(str(tmp_path)):
        with jax.profiler.StepTraceAnnotation("train", step_num=0):
            step(jnp.ones((64, 64))).block_until_ready()
    (analysis,) = analyze_path(tmp_path)
    assert not any("heap simulation" in w for w in analysis.profile.warnings), analysis.profile.warnings
    assert analysis.profile.memory is not None and analysis.profile.memory.peak_bytes > 0
