"""Header parsing, client-batch validation and the in-place patches."""

from __future__ import annotations

import struct

import pytest

from kafkad.protocol.errors import ErrorCode, KafkaError
from kafkad.storage.records import (
    BATCH_OVERHEAD,
    Compression,
    SimpleRecord,
    TimestampType,
    build_batch,
    build_control_batch,
    decode_batch,
    patch_offset_and_epoch,
    read_header,
    rewrite_crc,
    scan_valid_prefix,
    set_log_append_time,
    validate_client_batches,
)
from kafkad.storage.records.batch import increment_sequence
from kafkad.storage.records.records import ControlRecordType


def _batch(n: int = 3, **kwargs: object) -> bytearray:
    records = [SimpleRecord(b"k%d" % i, b"v" * i, (), 1000 + i) for i in range(n)]
    return bytearray(build_batch(records, **kwargs))  # type: ignore[arg-type]


def _code(buf: bytes | bytearray) -> ErrorCode:
    with pytest.raises(KafkaError) as info:
        validate_client_batches(memoryview(buf))
    return info.value.code


def _set(buf: bytearray, fmt: str, offset: int, value: int, *, fix_crc: bool = True) -> bytearray:
    struct.pack_into(fmt, buf, offset, value)
    if fix_crc:
        rewrite_crc(buf, 0)
    return buf


def test_header_fields_and_properties() -> None:
    buf = _batch(
        5,
        base_offset=40,
        producer_id=7,
        producer_epoch=2,
        base_sequence=10,
        partition_leader_epoch=3,
        is_transactional=True,
        compression=Compression.LZ4,
    )
    header = read_header(buf)
    assert header.position == 0
    assert header.size == len(buf)
    assert (header.base_offset, header.last_offset, header.records_count) == (40, 44, 5)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (7, 2, 10)
    assert header.last_sequence == 14
    assert header.partition_leader_epoch == 3
    assert header.compression is Compression.LZ4
    assert header.timestamp_type is TimestampType.CREATE_TIME
    assert header.is_transactional and not header.is_control
    assert (header.base_timestamp, header.max_timestamp) == (1000, 1004)


def test_read_header_at_position_in_larger_buffer() -> None:
    first, second = _batch(2), _batch(4, base_offset=2)
    header = read_header(first + second, len(first))
    assert header.position == len(first)
    assert header.base_offset == 2 and header.records_count == 4


def test_last_sequence_wraps_like_kafka() -> None:
    assert increment_sequence(0x7FFFFFFF - 1, 3) == 1
    assert increment_sequence(5, 3) == 8
    header = read_header(_batch(3, producer_id=1, producer_epoch=0, base_sequence=0x7FFFFFFF))
    assert header.last_sequence == 1


def test_validate_accepts_several_batches_and_any_base_offset() -> None:
    buf = _batch(2, base_offset=99) + _batch(3, compression=Compression.GZIP)
    headers = validate_client_batches(memoryview(buf))
    assert [(h.position, h.records_count) for h in headers] == [(0, 2), (headers[0].size, 3)]


@pytest.mark.parametrize(
    ("mutate", "code"),
    [
        (lambda b: b[: BATCH_OVERHEAD - 1], ErrorCode.CORRUPT_MESSAGE),  # short
        (lambda b: _set(b, ">b", 16, 1, fix_crc=False), ErrorCode.CORRUPT_MESSAGE),  # magic
        (lambda b: _set(b, ">q", 35, 5, fix_crc=False), ErrorCode.CORRUPT_MESSAGE),  # crc
        (lambda b: _set(b, ">i", 8, 40), ErrorCode.CORRUPT_MESSAGE),  # below overhead
        (lambda b: _set(b, ">i", 8, -1), ErrorCode.INVALID_RECORD),  # negative length
        (lambda b: b[:-1], ErrorCode.INVALID_RECORD),  # partial batch
        (lambda b: b + b"\x00" * 5, ErrorCode.CORRUPT_MESSAGE),  # trailing garbage
        (lambda b: b + b"\x00" * 70, ErrorCode.CORRUPT_MESSAGE),  # trailing zeros: magic 0
        (lambda b: _set(b, ">i", 57, 4), ErrorCode.INVALID_RECORD),  # count != delta + 1
        (lambda b: _set(_set(b, ">i", 57, 0), ">i", 23, -1), ErrorCode.INVALID_RECORD),  # empty
        (lambda b: _set(_set(b, ">i", 57, 99), ">i", 23, 98), ErrorCode.INVALID_RECORD),  # too many
        (lambda b: _set(b, ">h", 21, 5), ErrorCode.INVALID_RECORD),  # unknown codec
        (lambda b: bytearray(), ErrorCode.INVALID_RECORD),  # empty record set
    ],
)
def test_validate_rejects(mutate: object, code: ErrorCode) -> None:
    buf = mutate(_batch())  # type: ignore[operator]
    assert _code(buf) is code


def test_validate_rejects_client_control_batches_unless_allowed() -> None:
    marker = build_control_batch(
        ControlRecordType.COMMIT, producer_id=5, producer_epoch=1, coordinator_epoch=3, timestamp=9
    )
    assert _code(marker) is ErrorCode.INVALID_RECORD
    (header,) = validate_client_batches(memoryview(marker), allow_control=True)
    assert header.is_control and header.is_transactional


def test_patch_offset_and_epoch_keeps_crc_valid() -> None:
    buf = _batch(4) + _batch(2)
    view = memoryview(buf)
    headers = validate_client_batches(view)
    next_offset = 1000
    for header in headers:
        patch_offset_and_epoch(view, header.position, next_offset, 12)
        next_offset += header.records_count
    patched = validate_client_batches(view)
    assert [(h.base_offset, h.last_offset) for h in patched] == [(1000, 1003), (1004, 1005)]
    assert all(h.partition_leader_epoch == 12 for h in patched)
    assert [r.offset for r in decode_batch(buf, patched[1].position).records] == [1004, 1005]


def test_set_log_append_time_rewrites_crc_and_record_timestamps() -> None:
    buf = _batch(3)
    crc_before = read_header(buf).crc
    set_log_append_time(buf, 0, 5555)
    (header,) = validate_client_batches(memoryview(buf))
    assert header.crc != crc_before
    assert header.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert header.max_timestamp == 5555
    assert [r.timestamp for r in decode_batch(buf).records] == [5555] * 3
    # Same value again: nothing changes.
    before = bytes(buf)
    set_log_append_time(buf, 0, 5555)
    assert bytes(buf) == before


def test_scan_valid_prefix_stops_at_torn_tail_and_disorder() -> None:
    a = _batch(2, base_offset=0)
    b = _batch(3, base_offset=2)
    c = _batch(1, base_offset=4)  # overlaps b's offsets
    headers, length = scan_valid_prefix(a + b + c)
    assert [h.base_offset for h in headers] == [0, 2]
    assert length == len(a) + len(b)
    headers, length = scan_valid_prefix(a + b[:-3])
    assert [h.base_offset for h in headers] == [0] and length == len(a)
    assert scan_valid_prefix(b"") == ([], 0)
    assert scan_valid_prefix(bytes(100)) == ([], 0)
