"""The partition side of transactions on a real broker, without a transaction coordinator: transactional
Produce batches open transactions, raw WriteTxnMarkers (the tools' wire client, as another broker's
coordinator sends them) end them, and read_committed readers see exactly the committed data: the raw
Fetch (last stable offset, aborted_transactions), ListOffsets by isolation level, DescribeProducers,
and confluent-kafka's read_committed consumer; again after a kill -9 and restart (.txnindex and the
producer state's open transactions come back from disk)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from kafkad.protocol import ApiKey, ErrorCode
from kafkad.storage.records import SimpleRecord, build_batch
from kafkad.tools.client import KafkaClient
from tests.integration.broker_process import BrokerProcess

pytestmark = pytest.mark.integration

TOPIC = "txn-markers"
POLL_BOUND_S = 60.0
_RETRIABLE = (
    ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.NOT_COORDINATOR,
)


def _produce(c: KafkaClient, records: bytes, txn_id: str | None) -> dict[str, Any]:
    body = {
        "transactional_id": txn_id,
        "acks": -1,
        "timeout_ms": 30_000,
        "topic_data": [{"name": TOPIC, "partition_data": [{"index": 0, "records": records}]}],
    }
    out: dict[str, Any] = c.send(ApiKey.PRODUCE, body)["responses"][0]["partition_responses"][0]
    return out


def _batch(pid: int, seq: int, values: list[bytes], *, transactional: bool) -> bytes:
    now = int(time.time() * 1000)
    recs = [SimpleRecord(b"k", v, timestamp=now) for v in values]
    return build_batch(
        recs, producer_id=pid, producer_epoch=0, base_sequence=seq, is_transactional=transactional
    )


def _pid(c: KafkaClient, txn_id: str) -> int:
    """A producer for `txn_id`'s transactions on TOPIC-0. With a transaction coordinator in the broker
    (it serves AddPartitionsToTxn), the partition is added to the transaction as a client does, or
    KIP-890's verification refuses the Produce; the markers below still come raw, not from EndTxn.
    Without one, an idempotent producer id (the Produce accepts a transactional batch unverified)."""
    coordinated = c.supports(ApiKey.ADD_PARTITIONS_TO_TXN)
    body = {"transactional_id": txn_id if coordinated else None, "transaction_timeout_ms": 600_000}
    deadline = time.monotonic() + POLL_BOUND_S
    while coordinated:  # as a client: find the coordinator (it creates __transaction_state) until it is up
        found = c.conn.send(ApiKey.FIND_COORDINATOR, {"key": txn_id, "key_type": 1}, version=3)
        if found["error_code"] not in _RETRIABLE or time.monotonic() > deadline:
            assert found["error_code"] == 0, found
            break
        time.sleep(0.1)
    init = c.send(ApiKey.INIT_PRODUCER_ID, body)
    while init["error_code"] in _RETRIABLE and time.monotonic() < deadline:  # __transaction_state loading
        time.sleep(0.1)
        init = c.send(ApiKey.INIT_PRODUCER_ID, body)
    assert init["error_code"] == 0 and init["producer_epoch"] == 0, init
    pid: int = init["producer_id"]
    if coordinated:
        _add_partition(c, txn_id, pid)
    return pid


def _add_partition(c: KafkaClient, txn_id: str, pid: int) -> None:
    if not c.supports(ApiKey.ADD_PARTITIONS_TO_TXN):
        return
    body = {
        "v3_and_below_transactional_id": txn_id,
        "v3_and_below_producer_id": pid,
        "v3_and_below_producer_epoch": 0,
        "v3_and_below_topics": [{"name": TOPIC, "partitions": [0]}],
    }
    out = c.conn.send(ApiKey.ADD_PARTITIONS_TO_TXN, body, version=3)
    codes = [
        p["partition_error_code"]
        for t in out["results_by_topic_v3_and_below"]
        for p in t["results_by_partition"]
    ]
    assert codes == [0], out


def _markers(c: KafkaClient, *markers: tuple[int, int, bool, list[int]]) -> list[tuple[int, int, int]]:
    body = {
        "markers": [
            {
                "producer_id": pid,
                "producer_epoch": epoch,
                "transaction_result": commit,
                "coordinator_epoch": 0,
                "topics": [{"name": TOPIC, "partition_indexes": parts}],
            }
            for pid, epoch, commit, parts in markers
        ]
    }
    out = c.send(ApiKey.WRITE_TXN_MARKERS, body)
    return [
        (m["producer_id"], p["partition_index"], p["error_code"])
        for m in out["markers"]
        for t in m["topics"]
        for p in t["partitions"]
    ]


def _fetch(c: KafkaClient, isolation: int) -> dict[str, Any]:
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
                "topic": TOPIC,
                "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}],
            }
        ],
        "forgotten_topics_data": [],
        "rack_id": "",
    }
    part: dict[str, Any] = c.conn.send(ApiKey.FETCH, body, version=11)["responses"][0]["partitions"][0]
    return part


def _latest(c: KafkaClient, isolation: int) -> int:
    body = {
        "replica_id": -1,
        "isolation_level": isolation,
        "topics": [{"name": TOPIC, "partitions": [{"partition_index": 0, "timestamp": -1}]}],
    }
    offset: int = c.conn.send(ApiKey.LIST_OFFSETS, body, version=5)["topics"][0]["partitions"][0]["offset"]
    return offset


def _producers(c: KafkaClient) -> dict[int, int]:
    body = {"topics": [{"name": TOPIC, "partition_indexes": [0]}]}
    part = c.send(ApiKey.DESCRIBE_PRODUCERS, body)["topics"][0]["partitions"][0]
    assert part["error_code"] == 0
    return {p["producer_id"]: p["current_txn_start_offset"] for p in part["active_producers"]}


def _committed_values(bootstrap: str, expected: int) -> list[bytes]:
    """What confluent-kafka's read_committed consumer reads from the start (stops once it has
    `expected` values and its position reached the end of the last stable part)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"txn-markers-{time.monotonic_ns()}",
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.assign([TopicPartition(TOPIC, 0, 0)])
        values: list[bytes] = []
        deadline = time.monotonic() + POLL_BOUND_S
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None:
                assert msg.error() is None, msg.error()
                values.append(msg.value() or b"")
            if len(values) >= expected:
                # one more poll: nothing aborted may follow
                extra = consumer.poll(1.0)
                assert extra is None or extra.error() is not None, extra.value()
                return values
        raise AssertionError(f"read_committed consumer got {values} within {POLL_BOUND_S} s")
    finally:
        consumer.close()


def test_markers_end_transactions_and_read_committed_sees_only_commits(fresh_broker: BrokerProcess) -> None:
    b = fresh_broker
    with KafkaClient(b.bootstrap) as c:
        created = c.conn.send(
            ApiKey.CREATE_TOPICS,
            {"topics": [{"name": TOPIC, "num_partitions": 1, "replication_factor": 1}], "timeout_ms": 30_000},
            version=4,
        )
        assert created["topics"][0]["error_code"] == 0
        aborter, committer = _pid(c, "t-a"), _pid(c, "t-b")
        assert (
            _produce(c, _batch(aborter, 0, [b"a0", b"a1", b"a2"], transactional=True), "t-a")["error_code"]
            == 0
        )
        assert _produce(c, _batch(committer, 0, [b"b0", b"b1"], transactional=True), "t-b")["error_code"] == 0
        assert _produce(c, _batch(-1, -1, [b"p0"], transactional=False), None)["base_offset"] == 5

        # Both transactions open: read_committed stops at the first one's start.
        assert (_latest(c, 0), _latest(c, 1)) == (6, 0)
        open_fetch = _fetch(c, 1)
        assert (open_fetch["high_watermark"], open_fetch["last_stable_offset"]) == (6, 0)
        assert not open_fetch["records"]
        assert _producers(c) == {aborter: 0, committer: 3}
        # A plain write of a producer inside its transaction is refused (Kafka's InvalidTxnStateException).
        bad = _produce(c, _batch(aborter, 3, [b"x"], transactional=False), None)
        assert bad["error_code"] == ErrorCode.INVALID_TXN_STATE

        results = _markers(c, (aborter, 0, False, [0]), (committer, 0, True, [0]))
        assert results == [(aborter, 0, 0), (committer, 0, 0)]
        # Errors per partition: an unknown partition, a marker of an older producer epoch.
        assert _markers(c, (committer, 0, True, [7])) == [
            (committer, 7, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        ]
        assert _markers(c, (aborter, -1, True, [0]))[0][2] == ErrorCode.INVALID_PRODUCER_EPOCH

        done = _fetch(c, 1)
        assert (done["high_watermark"], done["last_stable_offset"]) == (8, 8)
        assert done["aborted_transactions"] == [{"producer_id": aborter, "first_offset": 0}]
        assert _fetch(c, 0)["aborted_transactions"] is None
        assert (_latest(c, 0), _latest(c, 1)) == (8, 8)
        assert _producers(c) == {aborter: -1, committer: -1}

        # A transaction left open across a crash still holds the LSO after the restart.
        _add_partition(c, "t-b", committer)
        assert _produce(c, _batch(committer, 2, [b"b2"], transactional=True), "t-b")["base_offset"] == 8
    assert _committed_values(b.bootstrap, 3) == [b"b0", b"b1", b"p0"]

    b.kill9()
    b.start()
    with KafkaClient(b.bootstrap) as c:
        after = _fetch(c, 1)
        assert (after["high_watermark"], after["last_stable_offset"]) == (9, 8)
        assert after["aborted_transactions"] == [{"producer_id": aborter, "first_offset": 0}]
        assert _markers(c, (committer, 0, True, [0])) == [(committer, 0, 0)]
        assert _latest(c, 1) == 10
    assert _committed_values(b.bootstrap, 4) == [b"b0", b"b1", b"p0", b"b2"]
    b.check_log()
