"""Full decode: interop with kafka-python both ways, control records, golden client frames."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import pytest
from crc32c import crc32c
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from kafkad.protocol.errors import ErrorCode, KafkaError
from kafkad.storage.records import (
    Compression,
    ControlRecordType,
    Record,
    SimpleRecord,
    build_batch,
    build_control_batch,
    decode_batch,
    iter_batches,
    validate_client_batches,
)

GOLDEN = Path(__file__).parents[3] / "golden" / "requests.jsonl"

RECORDS = [
    SimpleRecord(b"key", b"value", (("h1", b"x"), ("h2", None)), 1_700_000_000_000),
    SimpleRecord(None, b"no key", (), 1_700_000_000_005),
    SimpleRecord(b"no value", None, (("\u00e9t\u00e9", b""),), 1_699_999_999_990),
    SimpleRecord(b"", b"", (), 1_700_000_000_001),
    SimpleRecord(b"big", bytes(range(256)) * 40, (), 1_700_000_000_002),
]


def _kafka_python_batch(codec: Compression, base_sequence: int = -1) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=int(codec),
        is_transactional=False,
        producer_id=42 if base_sequence >= 0 else -1,
        producer_epoch=1 if base_sequence >= 0 else -1,
        base_sequence=base_sequence,
        batch_size=1 << 20,
    )
    for i, r in enumerate(RECORDS):
        builder.append(i, timestamp=r.timestamp, key=r.key, value=r.value, headers=list(r.headers))
    return bytes(builder.build())


def _kafka_python_view(buf: bytes) -> list[tuple[Any, ...]]:
    batch = DefaultRecordBatch(bytearray(buf))
    assert batch.validate_crc()
    return [(r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in batch]


def _ours(records: list[Record]) -> list[tuple[Any, ...]]:
    return [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in records]


@pytest.mark.parametrize("codec", list(Compression))
def test_kafka_python_batches_validate_and_decode_identically(codec: Compression) -> None:
    buf = _kafka_python_batch(codec, base_sequence=7)
    (header,) = validate_client_batches(memoryview(buf))
    assert header.compression is codec
    decoded = decode_batch(buf, verify_crc=True)
    assert _ours(decoded.records) == _kafka_python_view(buf)
    assert [r.sequence for r in decoded.records] == [7, 8, 9, 10, 11]
    assert decoded.records[2].headers == (("\u00e9t\u00e9", b""),)


@pytest.mark.parametrize("codec", list(Compression))
def test_kafka_python_reads_our_batches(codec: Compression) -> None:
    buf = build_batch(RECORDS, compression=codec, base_offset=100)
    theirs = _kafka_python_view(buf)
    assert [t[0] for t in theirs] == list(range(100, 105))
    assert theirs == _ours(decode_batch(buf).records)
    assert [(t[2], t[3], t[1]) for t in theirs] == [(r.key, r.value, r.timestamp) for r in RECORDS]


def test_control_batch_round_trip() -> None:
    buf = build_control_batch(
        ControlRecordType.ABORT,
        producer_id=9,
        producer_epoch=2,
        coordinator_epoch=17,
        timestamp=123,
        base_offset=50,
    )
    decoded = decode_batch(buf, verify_crc=True)
    assert decoded.header.is_control and decoded.header.is_transactional
    marker = decoded.control_record
    assert marker is not None
    assert (marker.type, marker.coordinator_epoch, marker.version) == (ControlRecordType.ABORT, 17, 0)
    assert DefaultRecordBatch(bytearray(buf)).is_control_batch
    data = decode_batch(build_batch(RECORDS[:1]))
    assert data.control_record is None


def test_iter_batches_over_segment_and_verify_crc() -> None:
    segment = bytearray(
        build_batch(RECORDS[:2], base_offset=0, compression=Compression.ZSTD)
        + build_batch(RECORDS[2:], base_offset=2)
    )
    offsets = [r.offset for b in iter_batches(segment) for r in b.records]
    assert offsets == [0, 1, 2, 3, 4]
    second = len(segment) - decode_batch(segment, 0).header.size
    segment[-second + 42] ^= 0x01  # maxTimestamp of the second batch: decodable, CRC wrong
    with pytest.raises(KafkaError) as info:
        list(iter_batches(segment))
    assert info.value.code is ErrorCode.CORRUPT_MESSAGE
    assert len(list(iter_batches(segment, verify_crc=False))) == 2


def test_decode_rejects_inconsistent_record_bytes() -> None:
    buf = bytearray(build_batch(RECORDS[:2]))
    struct.pack_into(">i", buf, 57, 3)  # claims 3 records, holds 2
    with pytest.raises(KafkaError) as info:
        decode_batch(buf)
    assert info.value.code in (ErrorCode.CORRUPT_MESSAGE, ErrorCode.INVALID_RECORD)


def _find_batches(frame: bytes) -> list[tuple[int, int]]:
    """Plausible v2 batches inside a Produce frame: magic 2 at +16 and a matching CRC."""
    found = []
    pos = 0
    while pos <= len(frame) - 61:
        if frame[pos + 16] == 2:
            size = struct.unpack_from(">i", frame, pos + 8)[0] + 12
            crc = struct.unpack_from(">I", frame, pos + 17)[0]
            if 61 <= size <= len(frame) - pos and crc32c(frame[pos + 21 : pos + size]) == crc:
                found.append((pos, size))
                pos += size
                continue
        pos += 1
    return found


def test_golden_produce_frames_decode() -> None:
    seen: set[tuple[str, Compression]] = set()
    for line in GOLDEN.read_text().splitlines():
        entry = json.loads(line)
        if entry["api_key"] != 0:
            continue
        frame = bytes.fromhex(entry["frame_hex"])
        batches = _find_batches(frame)
        assert batches, entry["client_id"]
        for pos, size in batches:
            (header,) = validate_client_batches(memoryview(frame)[pos : pos + size])
            decoded = decode_batch(frame, pos, verify_crc=True)
            assert len(decoded.records) == header.records_count
            assert [r.offset for r in decoded.records] == list(range(header.records_count))
            seen.add((entry["client_id"].split("-")[0], header.compression))
    codecs = {codec for _, codec in seen}
    assert codecs == set(Compression)
    assert ("rdkafka", Compression.SNAPPY) in seen and ("aiokafka", Compression.SNAPPY) in seen
