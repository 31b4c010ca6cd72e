"""The partition side of transactions on a real broker, without a transaction coordinator: transactional
Produce batches open transactions, raw WriteTxnMarkers (the tools' wire client, as another broker's
coordinator sends them) end them, and read_committed readers see exactly the committed data: the raw
Fetch (last stable offset, aborted_transactions), ListOffsets by isolation level, DescribeProducers,
and confluent-kafka's read_committed consumer; again after a kill -9 and restart (.txnindex and the
producer state's open transactions come back from disk)."""

from __future__ import annotations

import time

import pytest

from kafkad.protocol import ApiKey, ErrorCode
from kafkad.tools.client import KafkaClient
from tests.integration import txn_wire as w
from tests.integration.broker_process import BrokerProcess

pytestmark = pytest.mark.integration

TOPIC = "txn-markers"
POLL_BOUND_S = 60.0


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
        aborter, committer = w.producer(c, "t-a", TOPIC), w.producer(c, "t-b", TOPIC)
        assert (
            w.produce(c.conn, TOPIC, w.batch(aborter, 0, [b"a0", b"a1", b"a2"], transactional=True), "t-a")[
                "error_code"
            ]
            == 0
        )
        assert (
            w.produce(c.conn, TOPIC, w.batch(committer, 0, [b"b0", b"b1"], transactional=True), "t-b")[
                "error_code"
            ]
            == 0
        )
        assert (
            w.produce(c.conn, TOPIC, w.batch(-1, -1, [b"p0"], transactional=False), None)["base_offset"] == 5
        )

        # Both transactions open: read_committed stops at the first one's start.
        assert (w.latest(c.conn, TOPIC, 0), w.latest(c.conn, TOPIC, 1)) == (6, 0)
        open_fetch = w.fetch(c.conn, TOPIC, 1)
        assert (open_fetch["high_watermark"], open_fetch["last_stable_offset"]) == (6, 0)
        assert not open_fetch["records"]
        assert _producers(c) == {aborter: 0, committer: 3}
        # A plain write of a producer inside its transaction is refused (Kafka's InvalidTxnStateException).
        bad = w.produce(c.conn, TOPIC, w.batch(aborter, 3, [b"x"], transactional=False), None)
        assert bad["error_code"] == ErrorCode.INVALID_TXN_STATE

        results = w.markers(c.conn, TOPIC, (aborter, 0, False, [0]), (committer, 0, True, [0]))
        assert results == [(aborter, 0, 0), (committer, 0, 0)]
        # Errors per partition: an unknown partition, a marker of an older producer epoch.
        assert w.markers(c.conn, TOPIC, (committer, 0, True, [7])) == [
            (committer, 7, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        ]
        assert w.markers(c.conn, TOPIC, (aborter, -1, True, [0]))[0][2] == ErrorCode.INVALID_PRODUCER_EPOCH

        done = w.fetch(c.conn, TOPIC, 1)
        assert (done["high_watermark"], done["last_stable_offset"]) == (8, 8)
        assert done["aborted_transactions"] == [{"producer_id": aborter, "first_offset": 0}]
        assert w.fetch(c.conn, TOPIC, 0)["aborted_transactions"] is None
        assert (w.latest(c.conn, TOPIC, 0), w.latest(c.conn, TOPIC, 1)) == (8, 8)
        assert _producers(c) == {aborter: -1, committer: -1}

        # A transaction left open across a crash still holds the LSO after the restart.
        w.add_partition(c, "t-b", committer, TOPIC)
        assert (
            w.produce(c.conn, TOPIC, w.batch(committer, 2, [b"b2"], transactional=True), "t-b")["base_offset"]
            == 8
        )
    assert _committed_values(b.bootstrap, 3) == [b"b0", b"b1", b"p0"]

    b.kill9()
    b.start()
    with KafkaClient(b.bootstrap) as c:
        after = w.fetch(c.conn, TOPIC, 1)
        assert (after["high_watermark"], after["last_stable_offset"]) == (9, 8)
        assert after["aborted_transactions"] == [{"producer_id": aborter, "first_offset": 0}]
        assert w.markers(c.conn, TOPIC, (committer, 0, True, [0])) == [(committer, 0, 0)]
        assert w.latest(c.conn, TOPIC, 1) == 10
    assert _committed_values(b.bootstrap, 4) == [b"b0", b"b1", b"p0", b"b2"]
    b.check_log()
