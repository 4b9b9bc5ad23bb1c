"""The streaming reader's numpy decoder of event fields gives what protobuf's parser gives, on
lines written the way writers write them and on lines no writer writes (fields out of order,
num_occurrences, unknown fields, negative numbers, long stats, tag bytes inside values, events
longer than a chunk), and on damaged ones it gives the same or one clear XSpaceError."""

import random
import struct

import numpy as np
import pytest

from advisor.load import event_decoder, xplane_stream
from advisor.load.xplane_stream import StreamLine, XSpaceError


@pytest.fixture(autouse=True)
def _decode_short_runs_too(monkeypatch):
    """Short runs go to protobuf's parser (cheaper there): here the decoder reads them all."""
    monkeypatch.setattr(xplane_stream, "_SMALL_RUN", 0)


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _field(number: int, wire: int, payload: bytes) -> bytes:
    return _varint(number << 3 | wire) + payload


def _len(number: int, body: bytes) -> bytes:
    return _field(number, 2, _varint(len(body)) + body)


def _stat(rng: random.Random) -> bytes:
    body = _field(1, 0, _varint(rng.randrange(1, 40)))
    kind = rng.random()
    if kind < 0.3:
        body += _field(3, 0, _varint(rng.randrange(1 << 40)))
    elif kind < 0.5:
        body += _field(4, 0, _varint(-rng.randrange(1 << 20)))
    elif kind < 0.6:
        body += _field(2, 1, struct.pack("<d", rng.uniform(-1e9, 1e9)))
    elif kind < 0.7:
        body += _field(7, 0, _varint(rng.randrange(1, 40)))
    else:       # strings full of tag bytes, some over 127 bytes (a two-byte length)
        body += _len(5, "".join(rng.choice('"\x08\x10abcé€') for _ in range(rng.choice([0, 3, 30, 200]))).encode())
    return _len(4, body)


def _event(rng: random.Random, odd: bool) -> bytes:
    fields = []
    if rng.random() < 0.9:
        fields.append(_field(1, 0, _varint(rng.randrange(1, 1 << rng.choice([7, 14, 30])))))
    if rng.random() < 0.9:     # 0 is not written, as protobuf leaves out a zero
        fields.append(_field(2, 0, _varint(rng.randrange(1, 1 << 50) * rng.choice([1, 1, 1, -1]))))
    if rng.random() < 0.9:
        fields.append(_field(3, 0, _varint(rng.randrange(1, 1 << rng.choice([10, 30, 45])))))
    fields += [_stat(rng) for _ in range(rng.choice([0, 1, 4, 10]))]
    if odd:
        extra = rng.choice([
            _field(5, 0, _varint(rng.randrange(1, 100))),           # num_occurrences, offset's oneof partner
            _field(2, 0, _varint(rng.randrange(1, 1 << 30))),      # offset again: the last wins
            _field(1, 0, _varint(rng.randrange(1, 100))),
            _field(9, 0, _varint(rng.randrange(1 << 60))),          # unknown fields
            _field(10, 1, rng.randbytes(8)),
            _field(11, 5, rng.randbytes(4)),
            _len(12, rng.randbytes(rng.randrange(300))),
            _len(4, b""),
        ])
        fields.insert(rng.randrange(len(fields) + 1), extra)
        if rng.random() < 0.3:
            rng.shuffle(fields)
    return _len(4, b"".join(fields))


def _line(rng: random.Random, n: int, odd_share: float) -> bytes:
    """An XLine: its name, then n events."""
    return _len(2, b"line") + b"".join(_event(rng, rng.random() < odd_share) for _ in range(n))


class _Plane:
    def __init__(self, data: bytes):
        self._buf = data
        self._event_names = {}
        self._stat_names = {i: f"stat{i}" for i in range(1, 40)}


def _stream(data: bytes) -> StreamLine:
    return StreamLine(_Plane(data), 0, len(data))


def _by_protobuf(line: StreamLine):
    """(metadata id, start, duration, stats) of each event, by protobuf's parser of whole runs."""
    return [(ev._event.metadata_id, ev.start_ns, ev.duration_ns, list(ev.stats)) for ev in line.events]


def _by_columns(line: StreamLine):
    out = []
    for chunk in line.chunks():
        for i, (meta, start, dur) in enumerate(zip(chunk.ids.tolist(), chunk.start_ns.tolist(),
                                                     chunk.dur_ns.tolist())):
            out.append((meta, start, dur, list(chunk.stat_items(i))))
    return out


@pytest.mark.parametrize("chunk", [xplane_stream._CHUNK, 4096, 300])
@pytest.mark.parametrize("odd_share", [0.0, 0.2])
def test_columns_equal_protobuf(monkeypatch, chunk, odd_share):
    monkeypatch.setattr(xplane_stream, "_CHUNK", chunk)
    rng = random.Random(chunk * 10 + int(odd_share * 10))
    for n in (1, 3, 100, 600):
        ours, theirs = _by_columns(StreamLine(_Plane(data := _line(rng, n, odd_share)), 0, len(data))), None
        theirs = _by_protobuf(_stream(data))
        assert len(ours) == n and ours == theirs


def test_writers_lines_are_decoded_without_protobuf(monkeypatch):
    """Lines as writers write them never fall back to parsing every event with protobuf."""
    rng = random.Random(3)
    data = _line(rng, 3000, 0.0)

    def refuse(*args):
        raise AssertionError("fell back to protobuf")

    line = _stream(data)
    monkeypatch.setattr(xplane_stream, "_event_run", refuse)
    ids = np.concatenate([c.ids for c in line.chunks()])
    assert len(ids) == 3000


def test_damaged_lines_give_the_same_or_one_clear_error(monkeypatch):
    """Flipped bytes: where protobuf reads the line, the columns are the same; where it cannot,
    an XSpaceError (a damaged stat that is never read may go unnoticed: it changes nothing)."""
    monkeypatch.setattr(xplane_stream, "_CHUNK", 2048)
    rng = random.Random(5)
    clean = _line(rng, 60, 0.1)
    outcomes = {"same": 0, "rejected": 0}
    for _ in range(400):
        data = bytearray(clean)
        for _ in range(rng.choice([1, 1, 3])):
            data[rng.randrange(len(data))] = rng.randrange(256)
        data = bytes(data)
        try:
            theirs = _by_protobuf(_stream(data))
        except XSpaceError:
            theirs = None
        try:
            ours = _by_columns(_stream(data))
        except XSpaceError:
            assert theirs is None
            outcomes["rejected"] += 1
            continue
        if theirs is not None:
            assert ours == theirs
            outcomes["same"] += 1
    assert outcomes["same"] > 50 and outcomes["rejected"] > 50, outcomes


def test_the_chain_by_pointer_doubling_gives_the_same(monkeypatch):
    """Where following the steps takes too many rounds (values full of tag bytes), the chain is
    found by pointer doubling: the same columns."""
    monkeypatch.setattr(xplane_stream, "_CHUNK", 4096)
    data = _line(random.Random(11), 300, 0.2)
    expected = _by_protobuf(_stream(data))
    monkeypatch.setattr(event_decoder, "_found", lambda *args: None)
    assert _by_columns(_stream(data)) == expected
