"""Handler logic against a real LogManager in tmp_path (no sockets): call each handler with a Request."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from kafkad.api import load_handlers
from kafkad.api.broker import Broker
from kafkad.clock import ManualClock
from kafkad.cluster.producer_ids import ProducerIdManager
from kafkad.config.broker_config import load_config
from kafkad.network.registry import REGISTRY, RequestContext
from kafkad.protocol import ErrorCode, Request, RequestHeader
from kafkad.replication.manager import ReplicaManager
from kafkad.storage.log_manager import LogManager
from kafkad.storage.records import SimpleRecord, build_batch

load_handlers()


def make_broker(tmp_path: Path, *overrides: str) -> Broker:
    cfg = load_config(
        None, [f"log.dirs={tmp_path / 'data'}", "listeners=PLAINTEXT://127.0.0.1:9092", *overrides]
    )
    clock = ManualClock()
    lm = LogManager(cfg.log_manager_config(), cfg.log_config(), clock)
    lm.load()
    pids = ProducerIdManager(cfg.storage.log_dirs, 10)
    pids.load()
    return Broker(cfg, clock, lm, ReplicaManager(lm, 0), pids, 0, "cluster-x")


def call(broker: Broker, api_key: int, version: int, body: Mapping[str, Any]) -> Any:
    spec = REGISTRY.get(api_key)
    assert spec is not None and spec.supports(version)
    header = RequestHeader(api_key, version, 1, "test")
    full = dict(body)
    return asyncio.run(spec.fn(RequestContext(broker, header), Request(header, full)))  # type: ignore[arg-type]


def batch(*values: bytes, ts: int = 1_700_000_000_000) -> memoryview:
    return memoryview(
        bytearray(build_batch([SimpleRecord(None, v, timestamp=ts + i) for i, v in enumerate(values)]))
    )


def create(
    broker: Broker,
    name: str,
    n: int = 1,
    rf: int = 1,
    configs: Mapping[str, str] | None = None,
    validate_only: bool = False,
) -> dict[str, Any]:
    body = {
        "topics": [
            {
                "name": name,
                "num_partitions": n,
                "replication_factor": rf,
                "assignments": [],
                "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()],
            }
        ],
        "timeout_ms": 1000,
        "validate_only": validate_only,
    }
    result: dict[str, Any] = call(broker, 19, 4, body)["topics"][0]
    return result


def test_api_versions_registry_and_software_name(tmp_path: Path) -> None:
    b = make_broker(tmp_path)
    out = call(b, 18, 3, {"client_software_name": "librdkafka", "client_software_version": "2.16.1"})
    keys = {k["api_key"]: (k["min_version"], k["max_version"]) for k in out["api_keys"]}
    assert keys[0] == (0, 11) and keys[1] == (0, 17) and keys[23] == (0, 4)
    assert keys[17] == (0, 1) and keys[36] == (0, 2)  # advertised on every listener, as Kafka does
    bad = call(b, 18, 3, {"client_software_name": "-bad", "client_software_version": "1"})
    assert bad["error_code"] == ErrorCode.INVALID_REQUEST


def test_create_topics_rules(tmp_path: Path) -> None:
    b = make_broker(tmp_path, "num.partitions=3")
    assert create(b, "a", -1, -1)["error_code"] == 0
    assert len(b.replicas.partitions_of("a")) == 3
    assert create(b, "a")["error_code"] == ErrorCode.TOPIC_ALREADY_EXISTS
    assert create(b, "b", 1, 2)["error_code"] == ErrorCode.INVALID_REPLICATION_FACTOR
    assert create(b, "b", 0)["error_code"] == ErrorCode.INVALID_PARTITIONS
    assert create(b, "bad/name")["error_code"] == ErrorCode.INVALID_TOPIC_EXCEPTION
    bad = create(b, "c", configs={"retention.ms": "x"})
    assert bad["error_code"] == ErrorCode.INVALID_CONFIG and "retention.ms" in bad["error_message"]
    assert create(b, "v", validate_only=True)["error_code"] == 0
    assert not b.replicas.has_topic("v")


def test_metadata_auto_create_and_errors(tmp_path: Path) -> None:
    b = make_broker(tmp_path, "num.partitions=2")
    md = call(b, 3, 8, {"topics": [{"name": "auto"}], "allow_auto_topic_creation": True})
    assert md["controller_id"] == 0 and md["cluster_id"] == "cluster-x"
    assert md["brokers"] == [{"node_id": 0, "host": "127.0.0.1", "port": 9092, "rack": None}]
    assert len(md["topics"][0]["partitions"]) == 2
    md = call(b, 3, 8, {"topics": [{"name": "nope"}], "allow_auto_topic_creation": False})
    assert md["topics"][0]["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    md = call(b, 3, 8, {"topics": [{"name": ".."}], "allow_auto_topic_creation": True})
    assert md["topics"][0]["error_code"] == ErrorCode.INVALID_TOPIC_EXCEPTION
    off = make_broker(tmp_path / "2", "auto.create.topics.enable=false")
    md = call(off, 3, 4, {"topics": [{"name": "x"}], "allow_auto_topic_creation": True})
    assert md["topics"][0]["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    everything = call(b, 3, 8, {"topics": None, "allow_auto_topic_creation": True})
    assert [t["name"] for t in everything["topics"]] == ["auto"]


def produce(b: Broker, version: int, acks: int, records: Any, topic: str = "t", index: int = 0) -> Any:
    return call(
        b,
        0,
        version,
        {
            "acks": acks,
            "timeout_ms": 1000,
            "transactional_id": None,
            "topic_data": [{"name": topic, "partition_data": [{"index": index, "records": records}]}],
        },
    )


def test_produce_errors_and_offsets(tmp_path: Path) -> None:
    b = make_broker(tmp_path, "message.max.bytes=200")
    create(b, "t")

    def code(resp: Any) -> int:
        return int(resp["responses"][0]["partition_responses"][0]["error_code"])

    r = produce(b, 8, -1, batch(b"a", b"b"))["responses"][0]["partition_responses"][0]
    assert (r["error_code"], r["base_offset"], r["log_start_offset"]) == (0, 0, 0)
    assert produce(b, 8, 1, batch(b"c"))["responses"][0]["partition_responses"][0]["base_offset"] == 2
    assert produce(b, 8, 0, batch(b"d")) is None  # acks=0: no response
    assert code(produce(b, 2, 1, batch(b"e"))) == ErrorCode.INVALID_RECORD  # v2 batch below Produce v3
    assert code(produce(b, 8, 5, batch(b"e"))) == ErrorCode.INVALID_REQUIRED_ACKS
    assert code(produce(b, 8, 1, batch(b"x" * 300))) == ErrorCode.MESSAGE_TOO_LARGE
    assert code(produce(b, 8, 1, batch(b"e"), topic="missing")) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    bad = batch(b"e")
    bad[-1] ^= 1
    assert code(produce(b, 8, 1, bad)) == ErrorCode.CORRUPT_MESSAGE
    z = memoryview(
        bytearray(
            build_batch(
                [SimpleRecord(None, b"z", timestamp=1)],
                compression=__import__("kafkad.storage.records", fromlist=["Compression"]).Compression.ZSTD,
            )
        )
    )
    assert code(produce(b, 6, 1, z)) == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    assert b.replicas.get("t", 0) is not None
    assert b.replicas.get_or_raise("t", 0).high_watermark == 4


def fetch_body(
    topic: str,
    offset: int,
    *,
    max_wait: int = 0,
    min_bytes: int = 1,
    pmax: int = 1 << 20,
    max_bytes: int = 1 << 20,
    session_id: int = 0,
    session_epoch: int = -1,
) -> dict[str, Any]:
    return {
        "replica_id": -1,
        "max_wait_ms": max_wait,
        "min_bytes": min_bytes,
        "max_bytes": max_bytes,
        "isolation_level": 1,
        "session_id": session_id,
        "session_epoch": session_epoch,
        "topics": [
            {
                "topic": topic,
                "partitions": [
                    {
                        "partition": 0,
                        "fetch_offset": offset,
                        "log_start_offset": -1,
                        "partition_max_bytes": pmax,
                    }
                ],
            }
        ],
        "forgotten_topics_data": [],
    }


def test_fetch_slices_limits_and_out_of_range(tmp_path: Path) -> None:
    b = make_broker(tmp_path)
    create(b, "t")
    produce(b, 8, 1, batch(b"a" * 100))
    produce(b, 8, 1, batch(b"b" * 100))
    out = call(b, 1, 11, fetch_body("t", 0))
    p = out["responses"][0]["partitions"][0]
    assert p["error_code"] == 0 and p["high_watermark"] == 2 and p["last_stable_offset"] == 2
    size = sum(s.size for s in p["records"])
    data = b"".join(s.read() for s in p["records"])
    assert b"a" * 100 in data and b"b" * 100 in data
    # partition_max_bytes smaller than one batch: the first batch still comes back whole
    small = call(b, 1, 11, fetch_body("t", 0, pmax=10))["responses"][0]["partitions"][0]
    assert 10 < sum(s.size for s in small["records"]) < size
    oor = call(b, 1, 11, fetch_body("t", 5))["responses"][0]["partitions"][0]
    assert oor["error_code"] == ErrorCode.OFFSET_OUT_OF_RANGE
    unknown = call(b, 1, 11, fetch_body("t", 0, session_id=7, session_epoch=1))
    assert unknown["error_code"] == ErrorCode.FETCH_SESSION_ID_NOT_FOUND and unknown["responses"] == []


def test_fetch_sessions_serve_the_session_and_answer_what_changed(tmp_path: Path) -> None:
    """KIP-227 through the handler: a session made at epoch 0, incremental requests listing nothing read
    every partition of the session from its cached offsets and answer only those that changed."""
    b = make_broker(tmp_path)
    create(b, "t")
    produce(b, 8, 1, batch(b"a" * 100))
    full = call(b, 1, 11, fetch_body("t", 0, session_epoch=0))
    sid = full["session_id"]
    assert full["error_code"] == 0 and sid != 0 and full["responses"][0]["partitions"][0]["records"]
    listing_nothing = {**fetch_body("t", 1, session_id=sid, session_epoch=1), "topics": []}
    # the cached fetch offset is still 0: the records come back, HW unchanged
    again = call(b, 1, 11, listing_nothing)
    assert again["session_id"] == sid and again["responses"][0]["partitions"][0]["records"]
    # the client moves its offset to the end: nothing changed, nothing answered
    caught_up = call(b, 1, 11, fetch_body("t", 1, session_id=sid, session_epoch=2))
    assert (caught_up["error_code"], caught_up["session_id"], caught_up["responses"]) == (0, sid, [])
    produce(b, 8, 1, batch(b"b" * 100))
    moved = call(b, 1, 11, {**listing_nothing, "session_epoch": 3})
    p = moved["responses"][0]["partitions"][0]
    assert p["high_watermark"] == 2 and b"b" * 100 in b"".join(s.read() for s in p["records"])
    stale = call(b, 1, 11, {**listing_nothing, "session_epoch": 3})
    assert (stale["error_code"], stale["session_id"]) == (ErrorCode.INVALID_FETCH_SESSION_EPOCH, 0)


def test_fetch_long_poll_woken_by_append(tmp_path: Path) -> None:
    b = make_broker(tmp_path)
    create(b, "t")
    spec = REGISTRY.get(1)
    assert spec is not None

    async def go() -> Any:
        header = RequestHeader(1, 11, 1, "c")
        task = asyncio.ensure_future(
            spec.fn(RequestContext(b, header), Request(header, fetch_body("t", 0, max_wait=60_000)))
        )
        for _ in range(5):
            await asyncio.sleep(0)
        assert not task.done()  # parked: nothing to read
        b.replicas.get_or_raise("t", 0).append_as_leader(batch(b"hi"), now_ms=0, required_acks=1)
        return await asyncio.wait_for(task, 30)  # far less than max_wait: the append woke it

    out = asyncio.run(go())
    assert out["responses"][0]["partitions"][0]["high_watermark"] == 1


def test_list_offsets(tmp_path: Path) -> None:
    b = make_broker(tmp_path)
    create(b, "t")
    produce(b, 8, 1, batch(b"a", ts=1000))
    produce(b, 8, 1, batch(b"b", ts=2000))

    def lo(ts: int) -> tuple[int, int]:
        body = {
            "replica_id": -1,
            "isolation_level": 0,
            "topics": [
                {
                    "name": "t",
                    "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": ts}],
                }
            ],
        }
        p = call(b, 2, 5, body)["topics"][0]["partitions"][0]
        return p["error_code"], p["offset"]

    assert lo(-2) == (0, 0)
    assert lo(-1) == (0, 2)
    assert lo(1500) == (0, 1)
    assert lo(10**12) == (0, -1)


def test_describe_and_alter_configs(tmp_path: Path) -> None:
    b = make_broker(tmp_path, "log.retention.hours=1")
    create(b, "t", configs={"segment.bytes": "100000"})
    desc = call(
        b,
        32,
        1,
        {
            "resources": [{"resource_type": 2, "resource_name": "t", "configuration_keys": None}],
            "include_synonyms": False,
        },
    )
    rows = {c["name"]: c for c in desc["results"][0]["configs"]}
    assert rows["segment.bytes"]["value"] == "100000" and rows["segment.bytes"]["config_source"] == 1
    assert rows["retention.ms"]["value"] == "3600000" and rows["retention.ms"]["config_source"] == 4
    assert rows["max.message.bytes"]["config_source"] == 5

    def alter_retention(value: str) -> Any:
        configs = [{"name": "retention.ms", "value": value}]
        resources = [{"resource_type": 2, "resource_name": "t", "configs": configs}]
        return call(b, 33, 1, {"resources": resources, "validate_only": False})

    alter = alter_retention("1000")
    assert alter["responses"][0]["error_code"] == 0
    assert b.log_manager.topic_overrides("t") == {"retention.ms": "1000"}
    bad = alter_retention("x")
    assert bad["responses"][0]["error_code"] == ErrorCode.INVALID_CONFIG
    broker_rows = call(
        b,
        32,
        2,
        {
            "resources": [
                {"resource_type": 4, "resource_name": "0", "configuration_keys": ["log.retention.hours"]}
            ],
            "include_synonyms": False,
        },
    )
    (row,) = broker_rows["results"][0]["configs"]
    assert row["value"] == "1" and row["config_source"] == 4


def test_delete_topics_and_create_partitions(tmp_path: Path) -> None:
    b = make_broker(tmp_path)
    create(b, "t", 2)
    grow = call(
        b,
        37,
        1,
        {
            "topics": [{"name": "t", "count": 4, "assignments": None}],
            "timeout_ms": 1000,
            "validate_only": False,
        },
    )
    assert grow["results"][0]["error_code"] == 0 and len(b.replicas.partitions_of("t")) == 4
    shrink = call(
        b,
        37,
        1,
        {
            "topics": [{"name": "t", "count": 1, "assignments": None}],
            "timeout_ms": 1000,
            "validate_only": False,
        },
    )
    assert shrink["results"][0]["error_code"] == ErrorCode.INVALID_PARTITIONS
    out = call(b, 20, 3, {"topic_names": ["t", "nope"], "timeout_ms": 1000})
    assert [r["error_code"] for r in out["responses"]] == [0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
    assert not b.replicas.has_topic("t")
    off = make_broker(tmp_path / "2", "delete.topic.enable=false")
    create(off, "t")
    assert (
        call(off, 20, 3, {"topic_names": ["t"], "timeout_ms": 1})["responses"][0]["error_code"]
        == ErrorCode.TOPIC_DELETION_DISABLED
    )


def test_producer_ids_never_repeat_across_restarts(tmp_path: Path) -> None:
    b = make_broker(tmp_path)
    ids = [
        call(b, 22, 1, {"transactional_id": None, "transaction_timeout_ms": 1})["producer_id"]
        for _ in range(3)
    ]
    assert ids == [0, 1, 2]
    again = make_broker(tmp_path)  # a "restart": same dirs
    assert call(again, 22, 1, {"transactional_id": None, "transaction_timeout_ms": 1})["producer_id"] >= 10


def test_delete_records(tmp_path: Path) -> None:
    b = make_broker(tmp_path)
    create(b, "t")
    for v in (b"a", b"b", b"c"):
        produce(b, 8, 1, batch(v))
    out = call(
        b,
        21,
        1,
        {"topics": [{"name": "t", "partitions": [{"partition_index": 0, "offset": 2}]}], "timeout_ms": 1},
    )
    p = out["topics"][0]["partitions"][0]
    assert (p["error_code"], p["low_watermark"]) == (0, 2)
    beyond = call(
        b,
        21,
        1,
        {"topics": [{"name": "t", "partitions": [{"partition_index": 0, "offset": 9}]}], "timeout_ms": 1},
    )
    assert beyond["topics"][0]["partitions"][0]["error_code"] == ErrorCode.OFFSET_OUT_OF_RANGE


@pytest.mark.parametrize("version", [2])
def test_offset_for_leader_epoch(tmp_path: Path, version: int) -> None:
    b = make_broker(tmp_path)
    create(b, "t")
    produce(b, 8, 1, batch(b"a", b"b"))
    out = call(
        b,
        23,
        version,
        {
            "replica_id": -1,
            "topics": [
                {"topic": "t", "partitions": [{"partition": 0, "current_leader_epoch": 0, "leader_epoch": 0}]}
            ],
        },
    )
    p = out["topics"][0]["partitions"][0]
    assert (p["error_code"], p["leader_epoch"], p["end_offset"]) == (0, 0, 2)
