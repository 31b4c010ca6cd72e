"""Property: build_batch -> decode_batch is the identity for every codec, and kafka-python agrees."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch

from kafkad.storage.records import (
    Compression,
    SimpleRecord,
    TimestampType,
    build_batch,
    decode_batch,
    validate_client_batches,
)
from kafkad.storage.records.varint import encode_varint, read_varint

blobs = st.none() | st.binary(max_size=300)
headers = st.lists(st.tuples(st.text(max_size=10), blobs), max_size=4).map(tuple)
timestamps = st.integers(min_value=0, max_value=1 << 45)
records = st.builds(SimpleRecord, key=blobs, value=blobs, headers=headers, timestamp=timestamps)


@settings(max_examples=150, deadline=None)
@given(
    items=st.lists(records, min_size=1, max_size=20),
    codec=st.sampled_from(Compression),
    base_offset=st.integers(min_value=0, max_value=1 << 50),
    producer=st.tuples(
        st.integers(min_value=-1, max_value=1 << 40),
        st.integers(min_value=-1, max_value=32767),
        st.integers(min_value=-1, max_value=0x7FFFFFFF),
    ),
    log_append_time=st.booleans(),
)
def test_build_then_decode(
    items: list[SimpleRecord],
    codec: Compression,
    base_offset: int,
    producer: tuple[int, int, int],
    log_append_time: bool,
) -> None:
    producer_id, producer_epoch, base_sequence = producer
    ts_type = TimestampType.LOG_APPEND_TIME if log_append_time else TimestampType.CREATE_TIME
    buf = build_batch(
        items,
        compression=codec,
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        timestamp_type=ts_type,
    )
    (header,) = validate_client_batches(memoryview(buf))
    assert header.size == len(buf)
    assert header.compression is codec and header.timestamp_type is ts_type
    decoded = decode_batch(buf, verify_crc=True)
    max_ts = max(r.timestamp for r in items)
    assert header.max_timestamp == max_ts
    got = [(r.key, r.value, r.headers, r.timestamp) for r in decoded.records]
    want = [(r.key, r.value, r.headers, max_ts if log_append_time else r.timestamp) for r in items]
    assert got == want
    assert [r.offset for r in decoded.records] == [base_offset + i for i in range(len(items))]
    if base_sequence >= 0:
        assert decoded.records[-1].sequence == header.last_sequence
    # kafka-python's reader agrees on every record (CreateTime: it does not apply LogAppendTime).
    if not log_append_time:
        theirs = [
            (r.offset, r.timestamp, r.key, r.value, tuple(r.headers))
            for r in DefaultRecordBatch(bytearray(buf))
        ]
        assert theirs == [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in decoded.records]


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1))
def test_varint_round_trip(value: int) -> None:
    raw = encode_varint(value)
    assert len(raw) <= 10
    assert read_varint(raw + b"\x00", 0) == (value, len(raw))
