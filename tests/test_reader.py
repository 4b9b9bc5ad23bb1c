"""The streaming XSpace reader gives the same timeline as `jax.profiler.ProfileData`, on every
committed trace, and reads what ProfileData cannot (a file of concatenated copies)."""

from pathlib import Path

import pytest
from jax.profiler import ProfileData

from advisor.errors import AdvisorError
from advisor.load.loader import load_timeline
from advisor.load.timeline import read_timeline
from advisor.load.xplane_stream import StreamSpace
from conftest import FIXTURES

TRACES = sorted(FIXTURES.glob("*/plugins/**/*.xplane.pb")) + sorted(FIXTURES.glob("corpus/*/plugins/**/*.xplane.pb")) \
    + sorted(FIXTURES.glob("gpu-traces/*/plugins/**/*.xplane.pb")) \
    + sorted(FIXTURES.glob("parallel/*/plugins/**/*.xplane.pb"))


def _ids(path: Path) -> str:
    return str(path.relative_to(path.parents[3]).parts[0]) if len(path.parents) > 3 else path.name


@pytest.mark.parametrize("path", TRACES, ids=[_ids(p) for p in TRACES])
def test_same_timeline_as_profile_data(path):
    assert read_timeline(StreamSpace(path)) == read_timeline(ProfileData.from_file(str(path)))


def test_events_and_stats_match_profile_data():
    """Every event's name, start, duration and stats, not only what the timeline keeps."""
    path = next(FIXTURES.glob("gpu_bf16/plugins/**/*.xplane.pb"))
    ours = [(p.name, list(p.stats), [(line.name, [(e.name, e.start_ns, e.duration_ns, list(e.stats))
                                                  for e in line.events]) for line in p.lines])
            for p in StreamSpace(path).planes]
    theirs = [(p.name, list(p.stats), [(line.name, [(e.name, e.start_ns, e.duration_ns, list(e.stats))
                                                    for e in line.events]) for line in p.lines])
              for p in ProfileData.from_file(str(path)).planes]
    assert sum(len(evs) for _, _, lines in ours for _, evs in lines) > 1000
    assert ours == theirs


def test_concatenated_copies_read_as_one_space(tmp_path):
    """Concatenated copies parse as one XSpace with the planes repeated (protobuf merging);
    the first plane of a name is the one found, as with ProfileData."""
    src = next(FIXTURES.glob("transformer_remat/plugins/**/*.xplane.pb"))
    doubled = tmp_path / "doubled.xplane.pb"
    doubled.write_bytes(src.read_bytes() * 2)
    ours = StreamSpace(doubled)
    assert ours.plane_names() == [p.name for p in ProfileData.from_file(str(doubled)).planes]
    assert len(ours.plane_names()) == 2 * len(StreamSpace(src).plane_names())
    assert read_timeline(ours) == read_timeline(ProfileData.from_file(str(doubled)))


@pytest.mark.parametrize("cut", [0.3, 0.999])
def test_truncated_file_is_one_clear_error(tmp_path, cut):
    src = next(FIXTURES.glob("transformer_remat/plugins/**/*.xplane.pb"))
    data = src.read_bytes()
    bad = tmp_path / "host.xplane.pb"
    bad.write_bytes(data[: int(len(data) * cut)])
    with pytest.raises(AdvisorError, match="truncated or corrupt"):
        load_timeline(bad)


@pytest.mark.parametrize("name", ["transformer_remat", "gpu_bf16"])
def test_events_parsed_in_small_chunks(monkeypatch, name):
    """Lines longer than a chunk are cut into runs of whole events: same timeline."""
    from advisor.load import xplane_stream

    path = next(FIXTURES.glob(f"{name}/plugins/**/*.xplane.pb"))
    expected = read_timeline(StreamSpace(path))
    monkeypatch.setattr(xplane_stream, "_CHUNK", 2048)
    monkeypatch.setattr(xplane_stream, "_SMALL_RUN", 0)     # the numpy decoder reads the short runs too
    assert read_timeline(StreamSpace(path)) == expected
