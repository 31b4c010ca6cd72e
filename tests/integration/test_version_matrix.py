"""Issue 23 against a real kafkad: the old and new ends of the version matrix on the wire, and versions
outside it (Kafka's behaviour: ApiVersions answers UNSUPPORTED_VERSION with its own range, any other API
closes the connection)."""

from __future__ import annotations

import struct
import time
import zlib
from collections.abc import Iterator
from uuid import UUID

import pytest

from kafkad.protocol import ErrorCode, RequestHeader, decode_response, encode_request
from kafkad.storage.records import SimpleRecord, build_batch
from kafkad.storage.records.legacy import parse_message_set
from kafkad.storage.records.records import decode_batch, iter_headers
from tests.integration.broker_process import BrokerProcess
from tests.integration.raw_client import Raw

pytestmark = pytest.mark.integration

NOW_MS = int(time.time() * 1000)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with BrokerProcess(tmp_path_factory.mktemp("kafkad-matrix")) as b:
        yield b


@pytest.fixture()
def raw(broker: BrokerProcess) -> Iterator[Raw]:
    r = Raw(broker.port)
    yield r
    r.close()


def _produce(raw: Raw, topic: str, values: list[bytes]) -> int:
    batch = build_batch([SimpleRecord(None, v, timestamp=NOW_MS) for v in values])
    out = raw.call(
        0,
        11,
        {
            "acks": -1,
            "timeout_ms": 5000,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}],
        },
    )
    part = out["responses"][0]["partition_responses"][0]
    assert part["error_code"] == 0, part
    return int(part["base_offset"])


def _create(raw: Raw, topic: str) -> UUID:
    out = raw.call(
        19,
        7,
        {
            "topics": [
                {
                    "name": topic,
                    "num_partitions": 1,
                    "replication_factor": 1,
                    "assignments": [],
                    "configs": [],
                }
            ],
            "timeout_ms": 5000,
        },
    )
    assert out["topics"][0]["error_code"] == 0, out
    tid: UUID = out["topics"][0]["topic_id"]
    assert tid.int != 0
    return tid


def test_versions_above_the_matrix_close_the_connection(broker: BrokerProcess) -> None:
    for key, version in ((1, 18), (3, 13), (0, 12), (11, 10), (2, 10)):
        r = Raw(broker.port)
        try:
            body = encode_request(RequestHeader(key, 0, 5, "matrix"), {})[10:]  # any body: never read
            r.send_frame(struct.pack(">hhih", key, version, 5, 6) + b"matrix" + body)
            assert r.is_closed_by_peer(), (key, version)
        finally:
            r.close()
    ok = Raw(broker.port)  # the broker goes on serving
    try:
        assert (
            ok.call(18, 4, {"client_software_name": "t", "client_software_version": "1"})["error_code"] == 0
        )
    finally:
        ok.close()


def test_api_versions_v4_lists_the_matrix(raw: Raw) -> None:
    out = raw.call(18, 4, {"client_software_name": "matrix", "client_software_version": "1.0"})
    keys = {k["api_key"]: (k["min_version"], k["max_version"]) for k in out["api_keys"]}
    assert keys[0] == (0, 11) and keys[1] == (0, 17) and keys[2] == (0, 9) and keys[3] == (0, 12)
    assert keys[9] == (0, 9) and keys[10] == (0, 6) and keys[11] == (0, 9)


def test_list_offsets_v0_old_style_offsets(raw: Raw) -> None:
    _create(raw, "matrix-lo")
    _produce(raw, "matrix-lo", [b"a", b"b", b"c"])

    def v0(ts: int, max_num: int) -> dict[str, object]:
        out = raw.call(
            2,
            0,
            {
                "replica_id": -1,
                "topics": [
                    {
                        "name": "matrix-lo",
                        "partitions": [{"partition_index": 0, "timestamp": ts, "max_num_offsets": max_num}],
                    }
                ],
            },
        )
        part: dict[str, object] = out["topics"][0]["partitions"][0]
        return part

    latest = v0(-1, 1)
    assert (latest["error_code"], latest["old_style_offsets"]) == (0, [3])
    assert v0(-2, 1)["old_style_offsets"] == [0]
    assert v0(-1, 10)["old_style_offsets"] == [3, 0]  # the log end, then the one segment's base
    assert v0(-3, 1)["error_code"] == ErrorCode.UNSUPPORTED_VERSION  # v0 knows only -1 and -2


def _metadata_ids(raw: Raw, topics: list[dict[str, object]]) -> dict[object, dict[str, object]]:
    out = raw.call(
        3,
        12,
        {"topics": topics, "allow_auto_topic_creation": False, "include_topic_authorized_operations": False},
    )
    return {t["name"]: t for t in out["topics"]}


def test_metadata_v12_topic_ids_survive_a_restart(broker: BrokerProcess) -> None:
    raw = Raw(broker.port)
    created = _create(raw, "matrix-md")
    by_name = _metadata_ids(raw, [{"name": "matrix-md", "topic_id": UUID(int=0)}])
    assert by_name["matrix-md"]["error_code"] == 0 and by_name["matrix-md"]["topic_id"] == created
    by_id = _metadata_ids(raw, [{"name": None, "topic_id": created}])
    assert by_id["matrix-md"]["topic_id"] == created
    unknown = UUID(int=12345)
    missing = _metadata_ids(raw, [{"name": None, "topic_id": unknown}])
    assert missing[None]["error_code"] == ErrorCode.UNKNOWN_TOPIC_ID and missing[None]["topic_id"] == unknown
    raw.close()
    broker.restart()  # the id lives in each partition directory's partition.metadata
    raw = Raw(broker.port)
    try:
        assert _metadata_ids(raw, [{"name": None, "topic_id": created}])["matrix-md"]["topic_id"] == created
        text = (broker.data_dir / "matrix-md-0" / "partition.metadata").read_text()
        assert text.startswith("version: 0\ntopic_id: ")
    finally:
        raw.close()


def test_fetch_v13_and_delete_topics_v6_by_id(raw: Raw) -> None:
    tid = _create(raw, "matrix-id")
    _produce(raw, "matrix-id", [b"i0", b"i1"])

    def fetch(version: int, topic_id: UUID) -> dict[str, object]:
        body = {
            "replica_id": -1,
            "replica_state": {"replica_id": -1, "replica_epoch": -1},
            "max_wait_ms": 0,
            "min_bytes": 1,
            "max_bytes": 1 << 20,
            "session_epoch": -1,
            "topics": [
                {
                    "topic_id": topic_id,
                    "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}],
                }
            ],
            "forgotten_topics_data": [],
        }
        out: dict[str, object] = raw.call(1, version, body)["responses"][0]
        return out

    for version in (13, 15, 17):
        got = fetch(version, tid)
        part = got["partitions"][0]  # type: ignore[index]
        assert got["topic_id"] == tid and part["error_code"] == 0 and part["records"], (version, got)
    unknown = fetch(13, UUID(int=99))
    assert unknown["partitions"][0]["error_code"] == ErrorCode.UNKNOWN_TOPIC_ID  # type: ignore[index]
    deleted = raw.call(20, 6, {"topics": [{"name": None, "topic_id": tid}], "timeout_ms": 5000})
    assert deleted["responses"] == [
        {"name": "matrix-id", "topic_id": tid, "error_code": 0, "error_message": None}
    ]
    assert _metadata_ids(raw, [{"name": None, "topic_id": tid}])[None]["error_code"] == (
        ErrorCode.UNKNOWN_TOPIC_ID
    )


def test_fetch_v12_diverging_epoch_and_v0_without_down_conversion(raw: Raw) -> None:
    _create(raw, "matrix-f")
    _produce(raw, "matrix-f", [b"x", b"y"])

    def fetch(version: int, offset: int, last_epoch: int) -> dict[str, object]:
        out = raw.call(
            1,
            version,
            {
                "replica_id": -1,
                "max_wait_ms": 0,
                "min_bytes": 1,
                "max_bytes": 1 << 20,
                "session_epoch": -1,
                "topics": [
                    {
                        "topic": "matrix-f",
                        "partitions": [
                            {
                                "partition": 0,
                                "fetch_offset": offset,
                                "last_fetched_epoch": last_epoch,
                                "partition_max_bytes": 1 << 20,
                            }
                        ],
                    }
                ],
                "forgotten_topics_data": [],
            },
        )
        part: dict[str, object] = out["responses"][0]["partitions"][0]
        return part

    ok = fetch(12, 0, -1)
    assert (
        ok["error_code"] == 0 and ok["records"] and ok["diverging_epoch"] == {"epoch": -1, "end_offset": -1}
    )
    md = raw.call(3, 12, {"topics": [{"name": "matrix-f", "topic_id": UUID(int=0)}]})
    epoch = md["topics"][0]["partitions"][0]["leader_epoch"]
    # The fetcher read epoch `epoch` up to offset 3, past where this log's epoch ends (2): diverged there.
    diverged = fetch(12, 3, epoch)
    assert diverged["error_code"] == 0 and not diverged["records"]
    assert diverged["diverging_epoch"] == {"epoch": epoch, "end_offset": 2}
    # An epoch this log never had: Kafka's endOffsetFor gives (-1, -1), and so the divergence.
    assert fetch(12, 2, epoch + 5)["diverging_epoch"] == {"epoch": -1, "end_offset": -1}
    assert fetch(11, 3, epoch)["error_code"] == ErrorCode.OFFSET_OUT_OF_RANGE  # v11: no such check
    # Message format v0/v1 readers get the records down-converted (v0-1: magic 0, v2-3: magic 1).
    for version, magic in ((0, 0), (3, 1)):
        old = fetch(version, 1, -1)
        assert old["error_code"] == 0, old
        messages = parse_message_set(old["records"])  # type: ignore[arg-type]
        assert [(m.offset, m.value) for m in messages] == [(1, b"y")]
        assert old["records"][16] == magic  # type: ignore[index]
    at_end = fetch(0, 2, -1)
    assert at_end["error_code"] == 0 and at_end["high_watermark"] == 2 and not at_end["records"]


def test_produce_v0_to_v2_up_converts_and_refuses_corrupt_message_sets(raw: Raw) -> None:
    from kafka.record.legacy_records import LegacyRecordBatchBuilder  # type: ignore[import-untyped]

    _create(raw, "matrix-old")

    def message_set(magic: int, codec: int, values: list[bytes]) -> bytearray:
        b = LegacyRecordBatchBuilder(magic=magic, compression_type=codec, batch_size=1 << 20)
        for i, v in enumerate(values):
            b.append(i, timestamp=NOW_MS if magic else None, key=None, value=v)
        return bytearray(b.build())

    def produce(version: int, records: bytes) -> dict[str, object]:
        body = {
            "acks": 1,
            "timeout_ms": 5000,
            "topic_data": [{"name": "matrix-old", "partition_data": [{"index": 0, "records": records}]}],
        }
        part: dict[str, object] = raw.call(0, version, body)["responses"][0]["partition_responses"][0]
        return part

    assert produce(0, message_set(0, 0, [b"a", b"b"]))["base_offset"] == 0
    assert produce(2, message_set(1, 1, [b"c"]))["base_offset"] == 2  # gzip wrapper
    broken = message_set(1, 0, [b"d"])
    broken[-1] ^= 0xFF
    assert produce(2, bytes(broken))["error_code"] == ErrorCode.CORRUPT_MESSAGE
    garbage = message_set(1, 1, [b"e"])
    garbage[-6] ^= 0xFF  # inside the gzip stream; the wrapper CRC is recomputed below
    garbage[12:16] = struct.pack(">I", zlib.crc32(garbage[16:]))
    assert produce(2, bytes(garbage))["error_code"] == ErrorCode.CORRUPT_MESSAGE
    # Nothing of the refused sets was stored: the log holds a, b, c.
    out = raw.call(
        1,
        12,
        {
            "replica_id": -1,
            "max_wait_ms": 0,
            "min_bytes": 1,
            "max_bytes": 1 << 20,
            "session_epoch": -1,
            "topics": [
                {
                    "topic": "matrix-old",
                    "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}],
                }
            ],
            "forgotten_topics_data": [],
        },
    )
    part = out["responses"][0]["partitions"][0]
    assert part["high_watermark"] == 3
    stored = b"".join(bytes(b) for b in [part["records"]])
    values = [r.value for h in iter_headers(stored) for r in decode_batch(stored, h.position).records]
    assert values == [b"a", b"b", b"c"]


def test_offset_fetch_v8_batched_groups_and_find_coordinator_v4(raw: Raw, broker: BrokerProcess) -> None:
    _create(raw, "matrix-g")
    found = raw.call(10, 4, {"key_type": 0, "coordinator_keys": ["ga", "gb"]})
    assert [c["key"] for c in found["coordinators"]] == ["ga", "gb"]
    assert all(c["error_code"] == 0 and c["port"] == broker.port for c in found["coordinators"])
    commit = raw.call(
        8,
        0,  # v0: no generation or member, a simple commit
        {
            "group_id": "ga",
            "topics": [
                {
                    "name": "matrix-g",
                    "partitions": [{"partition_index": 0, "committed_offset": 7, "committed_metadata": "m"}],
                }
            ],
        },
    )
    assert commit["topics"][0]["partitions"][0]["error_code"] == 0
    out = raw.call(
        9,
        8,
        {
            "groups": [
                {"group_id": "ga", "topics": [{"name": "matrix-g", "partition_indexes": [0]}]},
                {"group_id": "gb", "topics": None},
            ],
            "require_stable": False,
        },
    )
    groups = {g["group_id"]: g for g in out["groups"]}
    ga = groups["ga"]["topics"][0]["partitions"][0]
    assert (ga["committed_offset"], ga["metadata"], ga["error_code"]) == (7, "m", 0)
    assert groups["gb"] == {"group_id": "gb", "topics": [], "error_code": 0}
    v0 = raw.call(9, 0, {"group_id": "ga", "topics": [{"name": "matrix-g", "partition_indexes": [0]}]})
    assert v0["topics"][0]["partitions"][0]["committed_offset"] == 7


def test_response_header_of_flexible_versions(raw: Raw) -> None:
    """A flexible request (Metadata v9+) gets response header v1 (tagged fields) and decodes whole."""
    raw.corr += 1
    raw.sock.sendall(encode_request(RequestHeader(3, 9, raw.corr, "m"), {"topics": []}))
    corr, out = decode_response(3, 9, raw.recv_frame())
    assert corr == raw.corr and out["topics"] == []
