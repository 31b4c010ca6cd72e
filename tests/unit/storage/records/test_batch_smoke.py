"""Smoke test of the batch header API against a batch built by kafka-python."""

from kafka.record.default_records import DefaultRecordBatchBuilder

from kafkad.storage.records import (
    TimestampType,
    patch_offset_and_epoch,
    scan_valid_prefix,
    set_log_append_time,
    validate_client_batches,
)


def _kafka_python_batch() -> bytearray:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=100_000,
    )
    for i in range(3):
        builder.append(i, timestamp=1000 + i, key=b"k", value=b"v" * i, headers=[])
    return bytearray(builder.build())


def test_validate_patch_and_log_append_time() -> None:
    buf = _kafka_python_batch()
    (header,) = validate_client_batches(memoryview(buf))
    assert (header.records_count, header.last_offset_delta, header.max_timestamp) == (3, 2, 1002)
    patch_offset_and_epoch(buf, 0, 100, 5)
    (header,) = validate_client_batches(memoryview(buf))
    assert (header.base_offset, header.last_offset, header.partition_leader_epoch) == (100, 102, 5)
    set_log_append_time(buf, 0, 99)
    (header,) = validate_client_batches(memoryview(buf))
    assert header.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert header.max_timestamp == 99
    headers, length = scan_valid_prefix(bytes(buf) + bytes(buf[:-1]))
    assert [h.base_offset for h in headers] == [100]
    assert length == len(buf)
