"""Raw transaction requests for the partition-side tests (no tests here), over the tools' wire client.

The tests end transactions with raw WriteTxnMarkers, as another broker's coordinator sends them. Their
producers come from the broker's transaction coordinator when it has one (it serves AddPartitionsToTxn:
the producer's partitions are added to its transaction as a client does, or KIP-890's verification
refuses the Produce), else are idempotent producer ids (a Produce is then accepted unverified).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from kafkad.protocol import ApiKey, ErrorCode
from kafkad.storage.records import SimpleRecord, build_batch
from kafkad.tools.client import BrokerConnection, KafkaClient

BOUND_S = 60.0
RETRIABLE = (
    ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.NOT_COORDINATOR,
    ErrorCode.CONCURRENT_TRANSACTIONS,
)


def batch(pid: int, seq: int, values: Sequence[bytes], *, transactional: bool) -> bytes:
    now = int(time.time() * 1000)
    recs = [SimpleRecord(b"k", v, timestamp=now) for v in values]
    return build_batch(
        recs, producer_id=pid, producer_epoch=0, base_sequence=seq, is_transactional=transactional
    )


def produce(conn: BrokerConnection, topic: str, records: bytes, txn_id: str | None) -> dict[str, Any]:
    body = {
        "transactional_id": txn_id,
        "acks": -1,
        "timeout_ms": 30_000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": records}]}],
    }
    out: dict[str, Any] = conn.send(ApiKey.PRODUCE, body)["responses"][0]["partition_responses"][0]
    return out


def _coordinator(c: KafkaClient, txn_id: str) -> BrokerConnection:
    """As a client: find `txn_id`'s coordinator (the first ask creates __transaction_state)."""
    deadline = time.monotonic() + BOUND_S
    while True:
        found = c.conn.send(ApiKey.FIND_COORDINATOR, {"key": txn_id, "key_type": 1}, version=3)
        if found["error_code"] not in RETRIABLE or time.monotonic() > deadline:
            assert found["error_code"] == 0, found
            return c.node(found["node_id"])
        time.sleep(0.1)


def _retrying(conn: BrokerConnection, api: ApiKey, body: dict[str, Any], version: int | None = None) -> Any:
    deadline = time.monotonic() + BOUND_S
    while True:
        out = conn.send(api, body, version=version)
        if out.get("error_code", 0) not in RETRIABLE or time.monotonic() > deadline:
            return out
        time.sleep(0.1)


def producer(c: KafkaClient, txn_id: str, topic: str) -> int:
    """A producer id (epoch 0) for `txn_id`'s transactions on `topic`-0, added to its transaction."""
    if not c.supports(ApiKey.ADD_PARTITIONS_TO_TXN):
        init = c.send(ApiKey.INIT_PRODUCER_ID, {"transactional_id": None, "transaction_timeout_ms": 600_000})
        assert init["error_code"] == 0, init
        pid: int = init["producer_id"]
        return pid
    coordinator = _coordinator(c, txn_id)
    body = {"transactional_id": txn_id, "transaction_timeout_ms": 600_000}
    init = _retrying(coordinator, ApiKey.INIT_PRODUCER_ID, body)
    assert init["error_code"] == 0 and init["producer_epoch"] == 0, init
    pid = init["producer_id"]
    add_partition(c, txn_id, pid, topic)
    return pid


def add_partition(c: KafkaClient, txn_id: str, pid: int, topic: str) -> None:
    """Add `topic`-0 to the producer's transaction (nothing to do without a coordinator)."""
    if not c.supports(ApiKey.ADD_PARTITIONS_TO_TXN):
        return
    body = {
        "v3_and_below_transactional_id": txn_id,
        "v3_and_below_producer_id": pid,
        "v3_and_below_producer_epoch": 0,
        "v3_and_below_topics": [{"name": topic, "partitions": [0]}],
    }
    deadline = time.monotonic() + BOUND_S
    while True:
        out = _coordinator(c, txn_id).send(ApiKey.ADD_PARTITIONS_TO_TXN, body, version=3)
        codes = [
            p["partition_error_code"]
            for t in out["results_by_topic_v3_and_below"]
            for p in t["results_by_partition"]
        ]
        if codes == [0]:
            return
        assert set(codes) <= set(RETRIABLE) and time.monotonic() < deadline, out
        time.sleep(0.1)


def markers(
    conn: BrokerConnection, topic: str, *markers: tuple[int, int, bool, list[int]]
) -> list[tuple[int, int, int]]:
    """WriteTxnMarkers (producer id, epoch, commit, partitions of `topic`): (pid, partition, error)."""
    body = {
        "markers": [
            {
                "producer_id": pid,
                "producer_epoch": epoch,
                "transaction_result": commit,
                "coordinator_epoch": 0,
                "topics": [{"name": topic, "partition_indexes": parts}],
            }
            for pid, epoch, commit, parts in markers
        ]
    }
    out = conn.send(ApiKey.WRITE_TXN_MARKERS, body)
    return [
        (m["producer_id"], p["partition_index"], p["error_code"])
        for m in out["markers"]
        for t in m["topics"]
        for p in t["partitions"]
    ]


def fetch(conn: BrokerConnection, topic: str, isolation: int) -> dict[str, Any]:
    """Fetch v11 of `topic`-0 from offset 0 as a consumer (a follower answers too: KIP-392)."""
    body = {
        "replica_id": -1,
        "max_wait_ms": 0,
        "min_bytes": 0,
        "max_bytes": 1 << 20,
        "isolation_level": isolation,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic": topic,
                "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}],
            }
        ],
        "forgotten_topics_data": [],
        "rack_id": "",
    }
    part: dict[str, Any] = conn.send(ApiKey.FETCH, body, version=11)["responses"][0]["partitions"][0]
    return part


def latest(conn: BrokerConnection, topic: str, isolation: int) -> int:
    body = {
        "replica_id": -1,
        "isolation_level": isolation,
        "topics": [{"name": topic, "partitions": [{"partition_index": 0, "timestamp": -1}]}],
    }
    offset: int = conn.send(ApiKey.LIST_OFFSETS, body, version=5)["topics"][0]["partitions"][0]["offset"]
    return offset
