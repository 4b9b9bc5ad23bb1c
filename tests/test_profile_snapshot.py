"""The loader builds, from every committed trace, the profile model recorded in
fixtures/profile_models.json.xz (taken before the reader was rewritten to compact columns):
the reader under the model can change, the model it gives cannot, unless on purpose."""

import json
import lzma
import math
import sys

import pytest

from conftest import FIXTURES

sys.path.insert(0, str(FIXTURES))
from snapshot_profile_models import SNAPSHOT, model_of, readable_copy, run_folders  # noqa: E402

EXPECTED = json.loads(lzma.decompress(SNAPSHOT.read_bytes()))
RUNS = run_folders()


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
def readable(tmp_path_factory):
    """readable(run) -> the run's folder, found by find_runs, with its traces decompressed: one copy
    per run for both tests (neither writes into it)."""
    from advisor.locate import find_runs

    folder, found = tmp_path_factory.mktemp("runs"), {}

    def copy(run):
        if run not in found:
            (found[run],) = find_runs(readable_copy(run, folder))
        return found[run]
    return copy


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
    _same(model_of(loader.load_run(readable(run))), EXPECTED[str(run.relative_to(FIXTURES))], "profile")


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
    from advisor.load import devices, host_lines, loader, op_store, ops, xplane_stream

    monkeypatch.setattr(xplane_stream, "_CHUNK", 4096)
    monkeypatch.setattr(ops, "BLOCK_OPS", 300)
    monkeypatch.setattr(ops, "HOLD_OPS", 200)
    monkeypatch.setattr(host_lines, "BLOCK_OPS", 5)
    monkeypatch.setattr(devices, "_SAMPLE_EVERY", 3)
    monkeypatch.setattr(op_store, "MEMORY_BUDGET", 0)
    monkeypatch.setattr(devices, "SLICE_OPS", 1000)
    if run in _XPROF:
        monkeypatch.setattr(loader, "start_xprof", lambda path: _Replay(*_XPROF[run]))
    _same(model_of(loader.load_run(readable(run))), EXPECTED[str(run.relative_to(FIXTURES))], "profile")
