"""Headers, response chunking, the KIP-511 fallback, defaults and error paths of the codec."""

from __future__ import annotations

import struct
from dataclasses import dataclass

import pytest

from kafkad.protocol import (
    UNKNOWN_TAGS,
    ApiKey,
    ErrorCode,
    InvalidRequestError,
    ProtocolDecodeError,
    RequestHeader,
    UnsupportedVersionError,
    api_versions_fallback_response,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    encode_response_bytes,
)


@dataclass(frozen=True, slots=True)
class FakeSlice:
    size: int


def _fetch_body(records: object) -> dict[str, object]:
    return {
        "throttle_time_ms": 0,
        "responses": [
            {
                "topic": "t",
                "partitions": [
                    {"partition_index": 0, "high_watermark": 10, "records": records},
                    {"partition_index": 1, "high_watermark": 0, "records": None},
                ],
            }
        ],
    }


def test_fetch_response_keeps_records_refs_as_own_chunks() -> None:
    hdr = RequestHeader(ApiKey.FETCH, 11, 77, "c")
    ref_a, ref_b = FakeSlice(100), FakeSlice(50)
    chunks = encode_response(hdr, _fetch_body([b"xy", ref_a, ref_b]))
    assert [type(c) for c in chunks] == [bytes, FakeSlice, FakeSlice, bytes]
    assert chunks[1] is ref_a and chunks[2] is ref_b
    total = sum(len(c) if isinstance(c, bytes) else c.size for c in chunks)
    head = chunks[0]
    assert isinstance(head, bytes)
    size, corr = struct.unpack_from(">ii", head)
    assert (size, corr) == (total - 4, 77)
    assert head.endswith(struct.pack(">i", 152) + b"xy")  # records length = sum of the parts


def test_fetch_response_round_trips_with_plain_bytes() -> None:
    hdr = RequestHeader(ApiKey.FETCH, 11, 5, "c")
    raw = encode_response_bytes(hdr, _fetch_body(b"batch"))
    corr, body = decode_response(ApiKey.FETCH, 11, raw[4:])
    assert corr == 5
    p0, p1 = body["responses"][0]["partitions"]
    assert bytes(p0["records"]) == b"batch"
    assert p1["records"] is None
    # Fields the caller left out come back with the schema's defaults.
    assert p0["last_stable_offset"] == -1 and p0["preferred_read_replica"] == -1
    assert p0["aborted_transactions"] == [] and body["error_code"] == 0


def test_api_versions_v3_response_uses_header_v0() -> None:
    hdr = RequestHeader(ApiKey.API_VERSIONS, 3, 9, "c")
    body = {"error_code": 0, "api_keys": [{"api_key": 18, "min_version": 0, "max_version": 3}]}
    raw = encode_response_bytes(hdr, body)
    # size, correlation id, then straight to error_code: no tagged-field byte after the header.
    assert raw[4:8] == struct.pack(">i", 9)
    assert raw[8:10] == b"\0\0"
    assert raw[10] == 2  # compact array of one entry
    assert decode_response(ApiKey.API_VERSIONS, 3, raw[4:])[1]["api_keys"][0]["max_version"] == 3


def test_api_versions_fallback_is_a_v0_body() -> None:
    raw = api_versions_fallback_response(42, 3)
    assert struct.unpack_from(">i", raw)[0] == len(raw) - 4
    corr, body = decode_response(ApiKey.API_VERSIONS, 0, raw[4:])
    assert corr == 42
    assert body["error_code"] == ErrorCode.UNSUPPORTED_VERSION
    assert body["api_keys"] == [{"api_key": 18, "min_version": 0, "max_version": 3}]


def test_unsupported_api_versions_version_carries_header() -> None:
    frame = bytearray(struct.pack(">hhih", 18, 9, 1234, 3) + b"abc" + b"\xff\xfe garbage")
    with pytest.raises(UnsupportedVersionError) as ei:
        decode_request(frame)
    assert ei.value.header.correlation_id == 1234
    assert ei.value.header.client_id == "abc"
    assert ei.value.code == ErrorCode.UNSUPPORTED_VERSION


def test_unknown_api_key_and_old_produce() -> None:
    with pytest.raises(UnsupportedVersionError):
        decode_request(bytearray(struct.pack(">hhih", 999, 0, 1, -1)))
    # Produce v0..2 bodies still decode (old message-set shape), so the broker can answer them.
    body = {"acks": 1, "timeout_ms": 5, "topic_data": [{"name": "t", "partition_data": []}]}
    frame = encode_request(RequestHeader(ApiKey.PRODUCE, 2, 1, None), body)
    req = decode_request(bytearray(frame[4:]))
    assert req.body["transactional_id"] is None and req.body["acks"] == 1


def test_truncated_frames_are_invalid_requests_and_trailing_bytes_ignored() -> None:
    frame = encode_request(RequestHeader(ApiKey.METADATA, 8, 1, "c"), {"topics": [{"name": "abc"}]})[4:]
    for cut in range(len(frame)):
        with pytest.raises((InvalidRequestError, UnsupportedVersionError)) as ei:
            decode_request(bytearray(frame[:cut]))
    assert ei.value.header is not None and ei.value.code == ErrorCode.INVALID_REQUEST
    # Kafka's parser reads the body and ignores what follows (librdkafka sends a second tag buffer)
    assert decode_request(bytearray(frame + b"\0\0")) == decode_request(bytearray(frame))
    scram = encode_request(
        RequestHeader(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, 2, "c"), {"deletions": [], "upsertions": []}
    )[4:]
    assert decode_request(bytearray(scram + b"\0")).body["deletions"] == []
    with pytest.raises(InvalidRequestError) as ei:
        decode_request(bytearray(b"\0\x03"))
    assert ei.value.header is None


def test_unknown_tagged_fields_round_trip() -> None:
    hdr = RequestHeader(ApiKey.API_VERSIONS, 3, 1, "c")
    frame = bytearray(encode_request(hdr, {"client_software_name": "a", "client_software_version": "1"})[4:])
    assert frame[-1] == 0
    frame[-1:] = b"\x02\x05\x01\x07\x09\x00"  # two tags: 5 -> b"\x07", 9 -> b""
    req = decode_request(frame)
    assert req.body[UNKNOWN_TAGS] == {5: b"\x07", 9: b""}
    assert encode_request(req.header, req.body)[4:] == frame


def test_known_tagged_fields_only_written_when_not_default() -> None:
    hdr = RequestHeader(ApiKey.API_VERSIONS, 3, 1, "c")
    base = {"error_code": 0, "api_keys": [], "throttle_time_ms": 0}
    plain = encode_response_bytes(hdr, base)
    assert plain.endswith(b"\0")
    tagged = encode_response_bytes(hdr, {**base, "finalized_features_epoch": 7})
    assert len(tagged) > len(plain)
    _, body = decode_response(ApiKey.API_VERSIONS, 3, tagged[4:])
    assert body["finalized_features_epoch"] == 7
    assert decode_response(ApiKey.API_VERSIONS, 3, plain[4:])[1]["finalized_features_epoch"] == -1


def test_decode_response_errors_are_protocol_errors() -> None:
    with pytest.raises(ProtocolDecodeError):
        decode_response(ApiKey.METADATA, 8, b"\0\0\0\1\0")


def test_encode_rejects_bad_values_naming_the_field() -> None:
    hdr = RequestHeader(ApiKey.METADATA, 8, 1, "c")
    with pytest.raises(ValueError, match="name"):
        encode_request(hdr, {"topics": [{"name": None}]})


def test_controlled_shutdown_v0_uses_request_header_v0() -> None:
    raw = encode_request(RequestHeader(ApiKey.CONTROLLED_SHUTDOWN, 0, 3, "ignored"), {"broker_id": 2})
    assert raw[4:] == struct.pack(">hhii", 7, 0, 3, 2)
    req = decode_request(bytearray(raw[4:]))
    assert req.header.client_id is None
    assert req.body == {"broker_id": 2, "broker_epoch": -1}


def test_flexible_response_uses_header_v1_and_compact_encoding() -> None:
    hdr = RequestHeader(ApiKey.LEADER_AND_ISR, 4, 8, "controller")
    body = {"error_code": 0, "partition_errors": [{"topic_name": "t", "partition_index": 1}]}
    raw = encode_response_bytes(hdr, body)
    # size, correlation id, header tag section (0), error_code, compact array of 1, compact "t".
    assert raw[4:] == struct.pack(">ib", 8, 0) + b"\0\0" + b"\x02" + b"\x02t" + b"\0\0\0\1\0\0\0" + b"\0"
    _, got = decode_response(ApiKey.LEADER_AND_ISR, 4, raw[4:])
    assert got["partition_errors"][0]["error_code"] == 0 and got["topics"] == []
