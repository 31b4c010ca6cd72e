from __future__ import annotations

from pathlib import Path

import pytest

from kafkad.protocol.errors import KafkaError
from kafkad.spark_bridge.arrow_decode import SCHEMA, decode_segment
from kafkad.storage.records import Compression, SimpleRecord, build_batch, iter_batches
from tests.unit.spark_bridge.factory import DAY_MS, write_partition


def _rows(buf: bytes) -> list[tuple[object, ...]]:
    out: list[tuple[object, ...]] = []
    for rb in decode_segment(buf, "t", 3):
        assert rb.schema == SCHEMA
        d = rb.to_pydict()
        for i in range(rb.num_rows):
            assert d["topic"][i] == "t" and d["partition"][i] == 3
            ts_ms = int(d["timestamp"][i].timestamp() * 1000)
            assert (d["date"][i] - d["date"][i].__class__(1970, 1, 1)).days == ts_ms // DAY_MS
            hdrs = tuple((h["key"], h["value"]) for h in d["headers"][i])
            out.append((d["offset"][i], ts_ms, d["timestamp_type"][i], d["key"][i], d["value"][i], hdrs))
    return out


def test_matches_reference_decoder_all_codecs(tmp_path: Path) -> None:
    write_partition(tmp_path, "t", 3, segments=1, batches_per_segment=12, records_per_batch=9)
    buf = (tmp_path / "t-3" / "00000000000000000000.log").read_bytes()
    expected = []
    for b in iter_batches(buf):
        if b.header.is_control:
            continue
        for r in b.records:
            tstype = int(b.header.timestamp_type)
            expected.append((r.offset, r.timestamp, tstype, r.key, r.value, r.headers))
    got = _rows(buf)
    assert got == expected
    assert len(got) == 11 * 9
    assert any(r[3] is None for r in got) and any(r[4] is None for r in got)
    assert any(r[5] for r in got) and any(r[2] == 1 for r in got)


def test_long_varints_and_big_values() -> None:
    recs = [
        SimpleRecord(key=b"k" * 300, value=b"v" * 20_000, timestamp=1_000_000 + i * 10_000_000_000)
        for i in range(5)
    ]
    buf = build_batch(recs, compression=Compression.ZSTD, base_offset=1 << 40)
    got = _rows(buf)
    assert [r[0] for r in got] == [(1 << 40) + i for i in range(5)]
    assert all(r[3] == b"k" * 300 and r[4] == b"v" * 20_000 for r in got)
    assert [r[1] for r in got] == [r.timestamp for r in recs]


def test_corruption_is_detected() -> None:
    buf = bytearray(build_batch([SimpleRecord(value=b"abc", timestamp=1)] * 3))
    buf[-1] = 2  # last record's header count 0 -> 1: its fields no longer fill it
    with pytest.raises(KafkaError):
        list(decode_segment(bytes(buf), "t", 0))
    with pytest.raises(KafkaError):
        list(decode_segment(bytes(buf), "t", 0, verify_crc=False))


def test_empty_and_torn_tail() -> None:
    assert list(decode_segment(b"", "t", 0)) == []
    buf = build_batch([SimpleRecord(value=b"abc", timestamp=1)])
    rows = [rb.num_rows for rb in decode_segment(buf + buf[:30], "t", 0)]
    assert rows == [1]
