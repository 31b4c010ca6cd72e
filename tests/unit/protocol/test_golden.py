"""Every golden frame from a real client decodes and re-encodes to the identical bytes."""

from __future__ import annotations

from uuid import UUID

import pytest

from kafkad.protocol import (
    SCHEMAS,
    ApiKey,
    UnsupportedVersionError,
    decode_request,
    encode_request,
)
from tests.unit.protocol.golden import GoldenFrame, load_golden

FRAMES = load_golden()


def test_golden_file_is_substantial() -> None:
    assert len(FRAMES) >= 150
    assert {f.api_key for f in FRAMES} >= {0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 18, 19, 20, 22}


@pytest.mark.parametrize("g", FRAMES, ids=[f.label for f in FRAMES])
def test_golden_round_trip(g: GoldenFrame) -> None:
    api = SCHEMAS[g.api_key]
    if not api.supports(g.api_version):
        # Only kafka-python's ApiVersions v4 lies above what we speak: the KIP-511 fallback path.
        assert (g.api_key, g.api_version) == (ApiKey.API_VERSIONS, 4)
        with pytest.raises(UnsupportedVersionError) as ei:
            decode_request(bytearray(g.frame))
        assert ei.value.header.api_version == 4
        assert ei.value.header.client_id == g.client_id
        return
    req = decode_request(bytearray(g.frame))
    assert req.header.api_key == g.api_key
    assert req.header.api_version == g.api_version
    assert req.header.client_id == g.client_id
    assert encode_request(req.header, req.body)[4:] == g.frame


def _first(api_key: int, version: int, client_prefix: str) -> GoldenFrame:
    return next(
        f
        for f in FRAMES
        if f.api_key == api_key and f.api_version == version and f.client_id.startswith(client_prefix)
    )


def test_librdkafka_produce_v8_values() -> None:
    g = _first(ApiKey.PRODUCE, 8, "rdkafka")
    frame = bytearray(g.frame)
    req = decode_request(frame)
    body = req.body
    assert body["acks"] in (-1, 0, 1)
    assert body["timeout_ms"] > 0
    assert body["transactional_id"] is None
    topic = body["topic_data"][0]
    assert isinstance(topic["name"], str) and topic["name"]
    records = topic["partition_data"][0]["records"]
    assert isinstance(records, memoryview)
    assert records[16] == 2  # record batch magic v2
    assert int.from_bytes(records[8:12], "big") + 12 == len(records)  # one whole batch
    # A view into the frame, not a copy: writes show through (storage patches offsets in place).
    assert not records.readonly
    records[0] = 0x7F
    assert frame[frame.index(bytes(records[1:61])) - 1] == 0x7F


def test_librdkafka_api_versions_v3_software_fields() -> None:
    g = _first(ApiKey.API_VERSIONS, 3, "rdkafka")
    req = decode_request(bytearray(g.frame))
    assert req.body["client_software_name"] == "confluent-kafka-python"
    assert req.body["client_software_version"].startswith("2.")


def test_fetch_v11_values() -> None:
    g = _first(ApiKey.FETCH, 11, "rdkafka")
    body = decode_request(bytearray(g.frame)).body
    assert body["replica_id"] == -1
    assert body["max_bytes"] > 0
    part = body["topics"][0]["partitions"][0]
    assert set(part) >= {
        "partition",
        "current_leader_epoch",
        "fetch_offset",
        "log_start_offset",
        "partition_max_bytes",
    }
    # Fields of later versions only are at their defaults.
    assert part["last_fetched_epoch"] == -1
    assert part["replica_directory_id"] == UUID(int=0)
    assert part["fetch_offset"] >= 0


def test_metadata_v8_values() -> None:
    g = _first(ApiKey.METADATA, 8, "rdkafka")
    body = decode_request(bytearray(g.frame)).body
    assert body["topics"] is None or isinstance(body["topics"], list)
    assert isinstance(body["allow_auto_topic_creation"], bool)
