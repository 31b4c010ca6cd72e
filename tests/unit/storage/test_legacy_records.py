"""Message format v0/v1 (storage/records/legacy.py) against an independent codec: kafka-python's
LegacyRecordBatchBuilder writes the message sets, its MemoryRecords reads ours."""

from __future__ import annotations

import gzip
import struct
import zlib

import pytest
from kafka.record import MemoryRecords  # type: ignore[import-untyped]
from kafka.record.legacy_records import LegacyRecordBatchBuilder  # type: ignore[import-untyped]

from kafkad.protocol import ErrorCode, KafkaError
from kafkad.storage.records import SimpleRecord, build_batch
from kafkad.storage.records.legacy import down_convert, parse_message_set, up_convert
from kafkad.storage.records.records import decode_batch

ROWS = [(b"k0", b"v0", 1000), (None, b"v1", 1001), (b"k2", None, 1002)]


def _message_set(magic: int, codec: int = 0) -> bytes:
    b = LegacyRecordBatchBuilder(magic=magic, compression_type=codec, batch_size=1 << 20)
    for i, (k, v, ts) in enumerate(ROWS):
        b.append(i, timestamp=ts if magic else None, key=k, value=v)
    return bytes(b.build())


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", [0, 1, 2], ids=["none", "gzip", "snappy"])
def test_up_convert_keeps_keys_values_and_timestamps(magic: int, codec: int) -> None:
    batch = up_convert(_message_set(magic, codec))
    records = decode_batch(batch, 0, verify_crc=True).records
    assert [(r.key, r.value) for r in records] == [(k, v) for k, v, _ in ROWS]
    assert [r.timestamp for r in records] == ([ts for *_, ts in ROWS] if magic else [-1, -1, -1])


@pytest.mark.parametrize("magic", [0, 1])
def test_down_convert_reads_back_with_kafka_python(magic: int) -> None:
    stored = bytes(build_batch([SimpleRecord(k, v, timestamp=ts) for k, v, ts in ROWS], base_offset=40))
    stored += bytes(build_batch([SimpleRecord(b"k3", b"v3", timestamp=1003)], base_offset=43))
    out = down_convert(stored, magic, first_offset=41)  # from inside the first batch
    records = MemoryRecords(out)
    got = []
    while (batch := records.next_batch()) is not None:
        assert batch.validate_crc()
        got += [(r.offset, r.key, r.value, r.timestamp) for r in batch]
    expect = [(41, None, b"v1", 1001), (42, b"k2", None, 1002), (43, b"k3", b"v3", 1003)]
    assert got == [(o, k, v, ts if magic else None) for o, k, v, ts in expect]
    if magic == 1:  # byte for byte what kafka-python's builder writes for the same messages
        b = LegacyRecordBatchBuilder(magic=1, compression_type=0, batch_size=1 << 20)
        for o, k, v, ts in expect:
            b.append(o, timestamp=ts, key=k, value=v)
        assert out == bytes(b.build())


def _corrupt(data: bytes) -> None:
    with pytest.raises(KafkaError) as e:
        up_convert(data)
    assert e.value.code is ErrorCode.CORRUPT_MESSAGE


def test_broken_crc_is_corrupt_message() -> None:
    data = bytearray(_message_set(1))
    data[-1] ^= 0xFF  # last value byte: covered by the CRC
    _corrupt(bytes(data))


def test_compressed_wrapper_hiding_garbage_is_corrupt_message() -> None:
    def wrapper(value: bytes) -> bytes:
        body = struct.pack(">bbq", 1, 1, 0) + struct.pack(">i", -1) + struct.pack(">i", len(value)) + value
        return struct.pack(">qiI", 0, len(body) + 4, zlib.crc32(body)) + body

    _corrupt(wrapper(b"not gzip at all"))  # does not decompress
    _corrupt(wrapper(gzip.compress(b"\x00" * 7 + b"garbage inside a valid gzip stream")))
    _corrupt(wrapper(gzip.compress(_message_set(1, codec=1))))  # a wrapper inside a wrapper
    _corrupt(_message_set(1)[:-3])  # truncated


def test_parse_opens_compressed_wrappers() -> None:
    assert [m.value for m in parse_message_set(_message_set(1, codec=1))] == [v for _, v, _ in ROWS]
