"""protocol/fetch_codec.py decodes Fetch requests and encodes Fetch responses exactly as the generic codec.

Requests: the body dict of the fast path equals the generic decoder's, key order included, on the golden
client frames and on generated requests of every version it takes (v11-17); shapes it does not take (tags,
forgotten topics, long compact lengths, null or truncated fields) return None and decode_request still
gives the generic result (or the same refusal). Responses: encode_response's chunks equal the generic
writer's (same bytes, same out-of-band refs in the same places) for generated answers, and answers the fast
writer does not take (tagged fields, missing or extra keys) fall back to the same bytes.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkad.protocol import (
    SCHEMAS,
    InvalidRequestError,
    RequestHeader,
    decode_request,
    encode_request,
    encode_response,
    fetch_codec,
)
from kafkad.protocol import primitives as p
from kafkad.protocol.codec import _finish, decode_request_header
from kafkad.protocol.compiler import UNKNOWN_TAGS, read_tags
from kafkad.protocol.registry import CODECS
from kafkad.storage.file_slice import FileSlice
from tests.property.test_protocol_schemas import _struct
from tests.unit.protocol.golden import load_golden

FETCH = 1
VERSIONS = list(range(fetch_codec.FIRST_VERSION, fetch_codec.LAST_VERSION + 1))
CLIENT_FRAMES = Path(__file__).resolve().parents[1] / "client" / "data" / "client_frames.json"
I32 = st.integers(-(2**31), 2**31 - 1)
I64 = st.integers(-(2**63), 2**63 - 1)
NAME = st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=20)


def _canon(v: Any) -> Any:
    """Dicts as (key, value) lists (order counts), records views as bytes: for exact comparison."""
    if isinstance(v, dict):
        return [(k, _canon(x)) for k, x in v.items()]
    if isinstance(v, list):
        return ["list", *(_canon(x) for x in v)]
    if isinstance(v, memoryview):
        return bytes(v)
    return (type(v).__name__, v)


def _generic_body(frame: bytes) -> Any:
    """The generic decoder's body (decode_request before the fast path)."""
    buf = memoryview(frame)
    header, pos = decode_request_header(buf)
    codec = CODECS[(header.api_key, header.api_version)]
    if codec.flexible:
        pos = read_tags(buf, pos, {}, {})
    return codec.read_request(buf, pos)[0]


def _check_request(frame: bytes, *, fast: bool | None) -> None:
    """decode_request equals the generic decoder; `fast`: whether the fast path took the frame (None:
    either)."""
    buf = memoryview(frame)
    header, pos = decode_request_header(buf)
    if CODECS[(FETCH, header.api_version)].flexible:
        pos = read_tags(buf, pos, {}, {})
    got = fetch_codec.read_request(buf, pos, header.api_version)
    if fast is not None:
        assert (got is not None) == fast
    want = _canon(_generic_body(frame))
    if got is not None:
        assert _canon(got) == want
    assert _canon(decode_request(bytearray(frame)).body) == want


def _frame(version: int, body: dict[str, Any], client_id: str | None = "c") -> bytes:
    return encode_request(RequestHeader(FETCH, version, 7, client_id), body)[4:]


def _golden_fetch_frames() -> list[bytes]:
    frames = [g.frame for g in load_golden() if g.api_key == FETCH]
    for exchange in json.loads(CLIENT_FRAMES.read_text()).values():
        for direction, hexed in exchange:
            raw = bytes.fromhex(hexed)
            if direction == 0 and struct.unpack_from(">h", raw, 4)[0] == FETCH:
                frames.append(raw[4:])
    return frames


def test_golden_client_fetch_frames_decode_fast_and_equal() -> None:
    frames = _golden_fetch_frames()
    assert len(frames) >= 12  # librdkafka, kafka-python, aiokafka, kafkajs, the follower's channel
    for frame in frames:
        _check_request(frame, fast=True)


@st.composite
def _request(draw: st.DrawFn, version: int) -> dict[str, Any]:
    """A Fetch request body of the usual shape: no tagged field, no forgotten topic."""
    parts = st.fixed_dictionaries(
        {
            "partition": I32,
            "current_leader_epoch": I32,
            "fetch_offset": I64,
            "last_fetched_epoch": I32,
            "log_start_offset": I64,
            "partition_max_bytes": I32,
        }
    )
    topic = st.fixed_dictionaries(
        {"topic": NAME, "topic_id": st.uuids(), "partitions": st.lists(parts, max_size=4)}
    )
    return {
        "replica_id": draw(I32),
        "max_wait_ms": draw(I32),
        "min_bytes": draw(I32),
        "max_bytes": draw(I32),
        "isolation_level": draw(st.integers(-128, 127)),
        "session_id": draw(I32),
        "session_epoch": draw(I32),
        "topics": draw(st.lists(topic, max_size=4)),
        "forgotten_topics_data": [],
        "rack_id": draw(NAME),
    }


@pytest.mark.parametrize("version", VERSIONS)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_generated_requests_decode_fast_and_equal(version: int, data: st.DataObject) -> None:
    body = data.draw(_request(version))
    _check_request(_frame(version, body, data.draw(st.none() | NAME)), fast=True)


@pytest.mark.parametrize("version", VERSIONS)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_any_schema_request_decodes_as_the_generic_codec(version: int, data: st.DataObject) -> None:
    """Every field the schema has, tagged ones included at random values: fast or not, equal."""
    body = data.draw(_struct(SCHEMAS[FETCH].request, version))
    frame = _frame(version, body)
    _check_request(frame, fast=None)


def _unusual(version: int) -> list[tuple[str, dict[str, Any]]]:
    part = {"partition": 0, "fetch_offset": 5, "partition_max_bytes": 1 << 20}
    base: dict[str, Any] = {
        "replica_id": 1,
        "max_wait_ms": 500,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "topics": [{"topic": "t", "topic_id": UUID(int=9), "partitions": [part]}],
        "rack_id": "r",
    }
    cases = [
        ("forgotten topics", {**base, "forgotten_topics_data": [{"topic": "t", "partitions": [1]}]}),
    ]
    if version >= 12:
        cases += [
            ("cluster_id tag", {**base, "cluster_id": "abc"}),
            ("unknown body tag", {**base, UNKNOWN_TAGS: {9: b"x"}}),
            (
                "unknown partition tag",
                {**base, "topics": [{**base["topics"][0], "partitions": [{**part, UNKNOWN_TAGS: {5: b""}}]}]},
            ),
            ("unknown topic tag", {**base, "topics": [{**base["topics"][0], UNKNOWN_TAGS: {5: b""}}]}),
            ("127 partitions", {**base, "topics": [{**base["topics"][0], "partitions": [part] * 127}]}),
            ("127 topics", {**base, "topics": base["topics"] * 127}),
            ("rack of 127 bytes", {**base, "rack_id": "r" * 127}),
        ]
        if version < 13:
            cases.append(
                ("name of 127 bytes", {**base, "topics": [{**base["topics"][0], "topic": "n" * 127}]})
            )
    if version >= 15:
        cases.append(("replica_state tag", {**base, "replica_state": {"replica_id": 3, "replica_epoch": 1}}))
    if version >= 17:
        cases.append(
            (
                "directory id tag",
                {
                    **base,
                    "topics": [
                        {**base["topics"][0], "partitions": [{**part, "replica_directory_id": UUID(int=1)}]}
                    ],
                },
            )
        )
    return cases


@pytest.mark.parametrize("version", VERSIONS)
def test_unusual_shapes_fall_back_to_the_generic_codec(version: int) -> None:
    for _name, body in _unusual(version):
        _check_request(_frame(version, body), fast=False)


@pytest.mark.parametrize("version", VERSIONS)
def test_many_partitions_of_the_classic_version_stay_fast(version: int) -> None:
    part = {"partition": 0, "fetch_offset": 5, "partition_max_bytes": 1 << 20}
    body = {"topics": [{"topic": "t", "topic_id": UUID(int=9), "partitions": [part] * 126}] * 2}
    _check_request(_frame(version, body), fast=True)
    if version == 11:  # int32 counts: any number
        body = {"topics": [{"topic": "t", "partitions": [part] * 1000}] * 3}
        _check_request(_frame(version, body), fast=True)


@pytest.mark.parametrize("version", VERSIONS)
def test_truncated_and_corrupt_frames_refused_or_decoded_as_before(version: int) -> None:
    """Every prefix of a frame, and every single-byte corruption of it: decode_request gives the generic
    body or raises InvalidRequestError exactly when the generic decoder fails."""
    part = {"partition": 2, "fetch_offset": 5, "last_fetched_epoch": 1, "partition_max_bytes": 9}
    body = {"topics": [{"topic": "tt", "topic_id": UUID(int=9), "partitions": [part, part]}], "rack_id": "ab"}
    frame = _frame(version, body)
    variants = [frame[:n] for n in range(len(frame))]
    variants += [
        frame[:i] + bytes([b]) + frame[i + 1 :] for i in range(10, len(frame)) for b in (0, 1, 0x80, 0xFF)
    ]
    for v in variants:
        try:
            want = _canon(_generic_body(v))
        except Exception:
            with pytest.raises(InvalidRequestError):
                decode_request(bytearray(v))
            continue
        assert _canon(decode_request(bytearray(v)).body) == want


# --- responses ---------------------------------------------------------------------------------------


class _Ref:
    """An out-of-band records chunk (a FileSlice stand-in compared by identity)."""

    def __init__(self, size: int) -> None:
        self.size = size


class _Cached(bytes):
    """api/fetch.py's CachedSlice: bytes with a size."""

    @property
    def size(self) -> int:
        return len(self)


def _generic_chunks(version: int, body: dict[str, Any]) -> list[Any]:
    codec = CODECS[(FETCH, version)]
    out = p.Out()
    out += struct.pack(">iiB", 0, 42, 0) if codec.flexible else struct.pack(">ii", 0, 42)
    codec.write_response(out, body)
    return _finish(out)


def _check_response(version: int, body: dict[str, Any], *, fast: bool) -> None:
    assert fetch_codec.write_response(p.Out(), body, version) == fast
    got = encode_response(RequestHeader(FETCH, version, 42, "c"), body)
    want = _generic_chunks(version, body)
    assert [c if isinstance(c, bytes) else id(c) for c in got] == [
        c if isinstance(c, bytes) else id(c) for c in want
    ]


_RECORDS = st.one_of(
    st.none(),
    st.binary(max_size=40),
    st.binary(max_size=40).map(bytearray),
    st.binary(max_size=40).map(lambda b: memoryview(b)),
    st.integers(0, 5000).map(_Ref),
    st.lists(
        st.one_of(st.binary(max_size=30).map(_Cached), st.integers(1, 5000).map(_Ref), st.binary(max_size=9)),
        max_size=3,
    ),
)


@st.composite
def _response(draw: st.DrawFn, version: int) -> dict[str, Any]:
    aborted = st.none() | st.lists(
        st.fixed_dictionaries({"producer_id": I64, "first_offset": I64}), max_size=3
    )
    part = st.fixed_dictionaries(
        {
            "partition_index": I32,
            "error_code": st.integers(-(2**15), 2**15 - 1),
            "high_watermark": I64,
            "last_stable_offset": I64,
            "log_start_offset": I64,
            "aborted_transactions": aborted,
            "preferred_read_replica": I32,
            "records": _RECORDS,
        }
    )
    keys: dict[str, st.SearchStrategy[Any]] = {"topic": NAME, "partitions": st.lists(part, max_size=4)}
    if version >= 13:
        keys["topic_id"] = st.uuids()
    topic = st.fixed_dictionaries(keys)
    return {
        "throttle_time_ms": draw(I32),
        "error_code": draw(st.integers(-(2**15), 2**15 - 1)),
        "session_id": draw(I32),
        "responses": draw(st.lists(topic, max_size=4)),
    }


@pytest.mark.parametrize("version", VERSIONS)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_generated_responses_encode_fast_and_equal(version: int, data: st.DataObject) -> None:
    _check_response(version, data.draw(_response(version)), fast=True)


@pytest.mark.parametrize("version", VERSIONS)
def test_unusual_responses_fall_back_to_the_generic_encoder(version: int) -> None:
    part = {
        "partition_index": 0,
        "error_code": 0,
        "high_watermark": 5,
        "last_stable_offset": 5,
        "log_start_offset": 0,
        "aborted_transactions": None,
        "preferred_read_replica": -1,
        "records": [FileSlice(3, 0, 100)],
    }
    topic = {"topic": "t", "topic_id": UUID(int=3), "partitions": [part]}
    body = {"throttle_time_ms": 0, "error_code": 0, "session_id": 9, "responses": [topic]}
    _check_response(version, body, fast=True)
    unusual = [
        {**body, "node_endpoints": [{"node_id": 1, "host": "h", "port": 9, "rack": None}]},
        {**body, UNKNOWN_TAGS: {7: b"x"}},
        {"throttle_time_ms": 0, "session_id": 9, "responses": [topic]},  # error_code by default
        {
            **body,
            "responses": [
                {**topic, "partitions": [{**part, "diverging_epoch": {"epoch": 1, "end_offset": 2}}]}
            ],
        },
        {**body, "responses": [{**topic, "partitions": [{k: v for k, v in part.items() if k != "records"}]}]},
        {
            **body,
            "responses": [{**topic, "partitions": [{**part, "aborted_transactions": [{"producer_id": 1}]}]}],
        },
        {**body, "responses": [{**topic, UNKNOWN_TAGS: {1: b""}}]},
    ]
    for b in unusual:
        _check_response(version, b, fast=False)


def test_bad_response_values_raise_as_the_generic_encoder() -> None:
    body = {"throttle_time_ms": 0, "error_code": 0, "session_id": 1 << 40, "responses": []}
    for version in VERSIONS:
        assert not fetch_codec.write_response(p.Out(), body, version)
        with pytest.raises((ValueError, struct.error)):
            encode_response(RequestHeader(FETCH, version, 1, "c"), body)
