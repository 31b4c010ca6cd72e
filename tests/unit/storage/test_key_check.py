"""key_check: the null-key scan a compacted topic runs on produce, checked against a full decode."""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkad.protocol.errors import ErrorCode, KafkaError
from kafkad.storage.records import (
    BATCH_OVERHEAD,
    Compression,
    SimpleRecord,
    build_batch,
    decode_batch,
    encode_record,
    rewrite_crc,
)
from kafkad.storage.records.codecs import XERIAL_MAGIC, decompress, xerial_compress
from kafkad.storage.records.key_check import first_null_key, null_key_indexes
from kafkad.storage.records.varint import encode_varint

TS = 1_700_000_000_000
CODECS = list(Compression)
_BATCH_LENGTH = struct.Struct(">i")


def _rec(key: bytes | None, i: int = 0, value: bytes = b"v" * 100) -> SimpleRecord:
    return SimpleRecord(key=key, value=value, timestamp=TS + i)


def _with_payload(batch: bytes, payload: bytes, codec: Compression) -> bytes:
    """`batch` with its records blob replaced by `payload` (sizes, codec bits and CRC fixed up)."""
    out = bytearray(batch[:BATCH_OVERHEAD] + payload)
    _BATCH_LENGTH.pack_into(out, 8, len(out) - 12)
    attributes = struct.unpack_from(">h", out, 21)[0]
    struct.pack_into(">h", out, 21, (attributes & ~0x07) | int(codec))
    rewrite_crc(out, 0)
    return bytes(out)


def _xerial(batch: bytes) -> bytes:
    """`batch` re-compressed with snappy-java's xerial framing (whatever its codec was)."""
    data = decompress(Compression(batch[22] & 0x07), batch[BATCH_OVERHEAD:])
    framed = xerial_compress(data, block_size=1000)
    assert framed.startswith(XERIAL_MAGIC)
    return _with_payload(batch, framed, Compression.SNAPPY)


def _decoded_null_keys(batch: bytes) -> list[int]:
    return [i for i, r in enumerate(decode_batch(batch).records) if r.key is None]


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
def test_all_keys_set_is_none(codec: Compression) -> None:
    batch = build_batch([_rec(b"k%d" % i, i) for i in range(200)], compression=codec)
    assert first_null_key(batch) is None
    assert null_key_indexes(memoryview(batch)) == []


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
@pytest.mark.parametrize("missing", [[0], [57], [199], [3, 70, 199]])
def test_null_keys_are_found(codec: Compression, missing: list[int]) -> None:
    recs = [_rec(None if i in missing else b"key-%d" % i, i) for i in range(200)]
    batch = build_batch(recs, compression=codec)
    assert first_null_key(batch) == missing[0]
    assert null_key_indexes(batch) == missing == _decoded_null_keys(batch)


def test_xerial_snappy_is_decoded() -> None:
    batch = _xerial(build_batch([_rec(b"a"), _rec(None, 1), _rec(b"c", 2)] * 300))
    assert first_null_key(batch) == 1
    assert null_key_indexes(batch) == list(range(1, 900, 3))


def test_empty_key_is_not_null() -> None:
    assert first_null_key(build_batch([_rec(b""), _rec(b"", 1)])) is None


def test_multibyte_varints_are_walked() -> None:
    # Records over 8 KiB (3-byte length), timestamp deltas of hours, offset deltas past 63, headers.
    big = SimpleRecord(key=b"big", value=b"x" * 20_000, timestamp=TS)
    recs = [big] + [
        SimpleRecord(key=b"k", value=b"v", headers=(("h", b"1"), ("n", None)), timestamp=TS + i * 3_600_000)
        for i in range(1, 100)
    ]
    recs.append(SimpleRecord(key=None, value=b"last", timestamp=TS - 10**9))
    batch = build_batch(recs)
    assert first_null_key(batch) == 100
    assert _decoded_null_keys(batch) == [100]


def test_any_negative_key_length_is_null() -> None:
    # Kafka reads keyLen < 0 as null whatever its value; -300 is a two-byte zig-zag varint.
    body = (
        b"\x00"
        + encode_varint(0)
        + encode_varint(1)
        + encode_varint(-300)
        + encode_varint(1)
        + b"v"
        + b"\x00"
    )
    odd = encode_varint(len(body)) + body
    first = encode_record(_rec(b"k"), 0, TS)
    batch = build_batch([_rec(b"k"), _rec(b"k", 1)])
    batch = _with_payload(batch, first + odd, Compression.NONE)
    assert first_null_key(batch) == 1
    assert _decoded_null_keys(batch) == [1]


def test_control_batches_are_exempt() -> None:
    batch = build_batch([_rec(None)], is_control=True, is_transactional=True, producer_id=1, producer_epoch=0)
    assert first_null_key(batch) is None


def test_batch_at_a_position_in_a_larger_buffer() -> None:
    a = build_batch([_rec(b"a")])
    b = build_batch([_rec(b"b"), _rec(None, 1)], compression=Compression.LZ4)
    buf = memoryview(bytearray(a + b))
    assert first_null_key(buf, 0) is None
    assert first_null_key(buf, len(a)) == 1


def test_framing_errors_are_invalid_record() -> None:
    good = build_batch([_rec(b"a"), _rec(b"b", 1)])
    records = good[BATCH_OVERHEAD:]
    # Trailing bytes after recordsCount records.
    with pytest.raises(KafkaError) as e:
        first_null_key(_with_payload(good, records + b"\x00" * 8, Compression.NONE))
    assert e.value.code == ErrorCode.INVALID_RECORD
    # Truncated: the last record runs past the end.
    with pytest.raises(KafkaError) as e:
        first_null_key(_with_payload(good, records[:-3], Compression.NONE))
    assert e.value.code == ErrorCode.INVALID_RECORD
    # A negative record length.
    with pytest.raises(KafkaError) as e:
        first_null_key(_with_payload(good, encode_varint(-5) + records[1:], Compression.NONE))
    assert e.value.code == ErrorCode.INVALID_RECORD
    # recordsCount larger than the data can hold.
    lying = bytearray(good)
    struct.pack_into(">i", lying, 57, 1000)
    with pytest.raises(KafkaError) as e:
        first_null_key(bytes(lying))
    assert e.value.code == ErrorCode.INVALID_RECORD


def test_corrupt_compressed_data_is_corrupt_message() -> None:
    batch = build_batch([_rec(b"a")], compression=Compression.ZSTD)
    with pytest.raises(KafkaError) as e:
        first_null_key(_with_payload(batch, b"\x28\xb5\x2f\xfd garbage", Compression.ZSTD))
    assert e.value.code == ErrorCode.CORRUPT_MESSAGE


_records = st.lists(
    st.builds(
        SimpleRecord,
        key=st.one_of(st.none(), st.binary(max_size=40)),
        value=st.one_of(st.none(), st.binary(max_size=300)),
        headers=st.lists(
            st.tuples(st.text(max_size=5), st.one_of(st.none(), st.binary(max_size=10))), max_size=3
        ).map(tuple),
        timestamp=st.integers(min_value=TS - 10**10, max_value=TS + 10**10),
    ),
    min_size=1,
    max_size=150,
)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(recs=_records, codec=st.sampled_from(CODECS), xerial=st.booleans())
def test_scan_matches_full_decode(recs: list[SimpleRecord], codec: Compression, xerial: bool) -> None:
    batch = build_batch(recs, compression=codec)
    if xerial and codec is Compression.SNAPPY:
        batch = _xerial(batch)
    expected = _decoded_null_keys(batch)
    assert null_key_indexes(batch) == expected
    assert first_null_key(batch) == (expected[0] if expected else None)
