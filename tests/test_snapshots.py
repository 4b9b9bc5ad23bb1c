"""Every committed trace, held to two snapshots: the profile model the loader builds from it
(fixtures/profile_models.json.xz, taken before the reader was rewritten to compact columns), and
every output advisor's commands give on it (fixtures/outputs.json.xz, taken before the code under
the commands was moved into one views contract, issue 32). The code under either can change; what
it gives cannot, unless on purpose. Each run is read once: the commands get copies of the profile
the model's test read."""

import difflib
import json
import lzma
import math
import pickle
import sys

import pytest

from advisor.job import Job
from conftest import FIXTURES

sys.path.insert(0, str(FIXTURES))
import snapshot_outputs  # noqa: E402
from snapshot_profile_models import SNAPSHOT, model_of, run_folders  # noqa: E402

EXPECTED = json.loads(lzma.decompress(SNAPSHOT.read_bytes()))
RUNS = run_folders()
_READ: dict = {}        # snapshot_outputs.run_key -> the pickled profile of a run as the loader built it


def _same(a, b, where="") -> None:
    """Equal, floats to 1e-9 relative (sums taken in another order may differ in the last bit)."""
    if isinstance(a, float) or isinstance(b, float):
        assert isinstance(a, (int, float)) and isinstance(b, (int, float)), where
        assert math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-6), f"{where}: {a} != {b}"
    elif isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), f"{where}: keys {sorted(a)} != {sorted(b)}"
        for k in a:
            _same(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), f"{where}: {len(a)} items != {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{where}[{i}]")
    else:
        assert a == b, f"{where}: {a!r} != {b!r}"


def test_every_fixture_is_in_the_snapshot():
    assert sorted(str(r.relative_to(FIXTURES)) for r in RUNS) == sorted(EXPECTED)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    """Where the runs are read and the commands run (snapshot_outputs.Workspace): the fixtures by a
    relative path, the compressed traces decompressed once."""
    return snapshot_outputs.Workspace(tmp_path_factory.mktemp("workspace"))


@pytest.fixture
def readable(workspace, monkeypatch):
    """readable(run) -> the run's RunFiles, by its relative path from the workspace folder that holds
    it (made the working folder)."""
    from advisor.locate import find_runs

    def find(run):
        logdir = str(run.relative_to(FIXTURES)).split("/plugins/")[0]
        monkeypatch.chdir(workspace.cwd(logdir))
        (found,) = find_runs(f"fixtures/{logdir}")
        return found
    return find


# {run: what xprof's converters gave on it (program names, HLO reader, result)}, kept by the
# whole read for the read in small pieces: the converters read the HLO, not the timeline the
# small pieces are about, and a run's result is the same both times.
_XPROF: dict = {}


@pytest.mark.parametrize("run", RUNS, ids=lambda r: str(r.relative_to(FIXTURES)))
def test_same_profile_model_as_the_snapshot(run, readable, monkeypatch):
    from advisor.load import loader

    def keep(path):
        pending = start(path)
        finish = pending.finish

        def kept(module_key=None):
            _XPROF[run] = (pending.names, pending.protos, finish(module_key))
            return _XPROF[run][2]
        pending.finish = kept
        return pending

    start = loader.start_xprof
    monkeypatch.setattr(loader, "start_xprof", keep)
    found = readable(run)
    readers = Job().readers()      # as every command but --select asks for the run
    profile = loader.load_run(found, None, readers)
    _READ[snapshot_outputs.run_key(found, None, readers)] = pickle.dumps(profile)
    _same(model_of(profile), EXPECTED[str(run.relative_to(FIXTURES))], "profile")


class _Replay:
    """What PendingXprof gives load_first_host, from a run's earlier read."""

    def __init__(self, names, protos, result):
        self.names, self.protos, self.result = names, protos, result     # protos: the read's own (in memory)

    def ask(self, module_key):
        pass

    def all_protos(self):
        return dict(self.result.hlo_protos)

    def finish(self, module_key=None):
        return self.result

    def cancel(self):
        pass


@pytest.mark.parametrize("run", RUNS, ids=lambda r: str(r.relative_to(FIXTURES)))
def test_same_model_read_in_small_pieces(run, readable, monkeypatch):
    """The same model when every bound is tiny: lines parsed 4 KB at a time (ops held open
    across chunks, at most 200 held behind an open op), blocks of 300 ops and of 5 waits, all
    spilled to disk, device activity in slices of 1,000 ops (ops and waits carried from one
    slice into the next). xprof's converters are not run again where the whole read kept their
    result (the same module's test of the same run)."""
    from advisor.load import device_totals as devices
    from advisor.load import host_lines, loader, op_store, xplane_stream
    from advisor.load import op_accumulator as ops

    monkeypatch.setattr(xplane_stream, "_CHUNK", 4096)
    monkeypatch.setattr(ops, "BLOCK_OPS", 300)
    monkeypatch.setattr(ops, "HOLD_OPS", 200)
    monkeypatch.setattr(host_lines, "BLOCK_OPS", 5)
    monkeypatch.setattr(devices, "_SAMPLE_EVERY", 3)
    monkeypatch.setattr(op_store, "MEMORY_BUDGET", 0)
    monkeypatch.setattr(devices, "SLICE_OPS", 1000)
    if run in _XPROF:
        monkeypatch.setattr(loader, "start_xprof", lambda path: _Replay(*_XPROF[run]))
    _same(model_of(loader.load_run(readable(run), None, Job().readers())), EXPECTED[str(run.relative_to(FIXTURES))],
          "profile")


OUTPUTS = snapshot_outputs.read()
CASES = snapshot_outputs.cases()

# The outputs the views contract changed on purpose, against the snapshot taken before it (issue 32,
# item 2): a rule's peak is the efficiency section's, the user's peaks where given. On these GPU
# traces run with --peak-flops 100T --peak-bandwidth 1TB/s, float32-activations compared the device
# table's float32 and bfloat16 columns (2x) whatever the user passed; it reads the peak view now,
# which gives both dtypes the user's one FLOP/s, so it counts only the memory-bound ops' halved bytes
# (gpu_remat: 3.98 -> 0.98 ms per step, below the share that makes it a warning; gpu_scan 4.07 ->
# 2.06 ms; gpu_h2d_idle likewise). Their JSON and text outputs changed; no other output did.
CHANGED_BY_THE_PEAK_VIEW = ("peaks gpu_remat", "peaks gpu_scan", "peaks gpu_h2d_idle")


def test_every_fixture_has_its_outputs():
    assert sorted(OUTPUTS) == sorted(CASES)


@pytest.mark.parametrize("case", list(CASES))
def test_same_outputs_as_the_snapshot(case, workspace):
    """The commands print and write, byte for byte, what the snapshot holds (fixtures/snapshot_outputs.py)."""
    with snapshot_outputs.reading_each_run_once(_READ):
        got = CASES[case](workspace)
    expected = OUTPUTS[case]
    assert sorted(got) == sorted(expected)
    for name in expected:
        if got[name] != expected[name]:
            diff = difflib.unified_diff(expected[name].splitlines(), got[name].splitlines(), "snapshot", "now",
                                        n=1, lineterm="")
            pytest.fail(f"{case}: {name} differs from the snapshot:\n" + "\n".join(list(diff)[:60]))


@pytest.mark.parametrize("case", CHANGED_BY_THE_PEAK_VIEW)
def test_the_rules_measure_against_the_efficiency_sections_peak(case):
    """Where the snapshot changed on purpose: float32-activations' advice cites the peak the
    efficiency section names (the user's), never the device table's columns."""
    (run,) = json.loads(OUTPUTS[case]["json stdout"])["runs"]
    source = run["summary"]["efficiency"]["peak"]["source"]
    (f,) = [f for f in run["findings"] if f["rule"] == "float32-activations"]
    assert source == "FLOP/s: --peak-flops; bytes/s: --peak-bandwidth"
    assert f"({source})" in f["recommendation"]["text"] and "data sheet" not in f["recommendation"]["text"]
