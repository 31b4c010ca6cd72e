"""decode_fetch_response: the follower's own Fetch v11 response decoder agrees with the schema codec on
any response (hypothesis: topics, errors, aborted transactions, null/empty/non-empty records) and refuses
a malformed frame with ProtocolDecodeError, as the codec."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkad.protocol import ApiKey, ProtocolDecodeError, RequestHeader, decode_response, encode_response_bytes
from kafkad.replication.fetch_response import decode_fetch_response

i64 = st.integers(-(2**63), 2**63 - 1)
partition = st.fixed_dictionaries(
    {
        "partition_index": st.integers(0, 2**31 - 1),
        "error_code": st.integers(-1, 120),
        "high_watermark": i64,
        "last_stable_offset": i64,
        "log_start_offset": i64,
        "aborted_transactions": st.none()
        | st.lists(st.fixed_dictionaries({"producer_id": i64, "first_offset": i64}), max_size=3),
        "preferred_read_replica": st.integers(-1, 5),
        "records": st.none() | st.binary(max_size=300),
    }
)
response = st.fixed_dictionaries(
    {
        "throttle_time_ms": st.integers(0, 1000),
        "error_code": st.integers(0, 120),
        "session_id": st.just(0),
        "responses": st.lists(
            st.fixed_dictionaries(
                {"topic": st.text(max_size=20), "partitions": st.lists(partition, max_size=4)}
            ),
            max_size=4,
        ),
    }
)


def frame(body: dict[str, Any]) -> bytearray:
    return bytearray(encode_response_bytes(RequestHeader(ApiKey.FETCH, 11, 9, "c"), body)[4:])


@given(response)
def test_agrees_with_the_codec(body: dict[str, Any]) -> None:
    f = frame(body)
    error, parts = decode_fetch_response(f)
    _, want = decode_response(ApiKey.FETCH, 11, bytearray(f))
    assert error == want["error_code"]
    flat = [(t["topic"], p) for t in want["responses"] for p in t["partitions"]]
    assert len(parts) == len(flat)
    for got, (topic, p) in zip(parts, flat, strict=True):
        assert got.topic == topic
        assert got.partition == p["partition_index"]
        assert got.error_code == p["error_code"]
        assert got.high_watermark == p["high_watermark"]
        assert got.log_start_offset == p["log_start_offset"]
        assert (None if got.records is None else bytes(got.records)) == (
            None if p["records"] is None else bytes(p["records"])
        )


def test_malformed_frames_raise_protocol_decode_error() -> None:
    body = {
        "throttle_time_ms": 0,
        "error_code": 0,
        "session_id": 0,
        "responses": [
            {
                "topic": "t",
                "partitions": [
                    {
                        "partition_index": 0,
                        "error_code": 0,
                        "high_watermark": 5,
                        "last_stable_offset": 5,
                        "log_start_offset": 0,
                        "aborted_transactions": None,
                        "preferred_read_replica": -1,
                        "records": b"x" * 50,
                    }
                ],
            }
        ],
    }
    f = frame(body)
    for bad in (f[:-1], f + b"\0", f[:10], bytearray(f[:20]) + b"\x7f\xff" + f[22:]):
        with pytest.raises(ProtocolDecodeError):
            decode_fetch_response(bytearray(bad))
