"""End to end on a standalone broker: confluent-kafka's transactional producer commits and aborts, and a
read_committed consumer (librdkafka) sees exactly the committed records, in order, while a
read_uncommitted one sees everything. Needs the transaction coordinator (txn-coord's branch) with this
branch's partition side: markers, LSO, aborted transactions in Fetch."""

from __future__ import annotations

import time

import pytest

from tests.integration.broker_process import BrokerProcess

pytestmark = pytest.mark.integration

TOPIC = "txn-e2e"
POLL_BOUND_S = 60.0


def _read(bootstrap: str, isolation: str, expected: int) -> list[tuple[int, bytes]]:
    """(partition, value) of everything a consumer with `isolation` reads from the start: stops after
    `expected` records and one more empty poll (a record more fails the comparison)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"txn-e2e-{isolation}-{time.monotonic_ns()}",
            "isolation.level": isolation,
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.assign([TopicPartition(TOPIC, p, 0) for p in (0, 1)])
        out: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + POLL_BOUND_S
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None:
                assert msg.error() is None, msg.error()
                out.append((msg.partition() or 0, msg.value() or b""))
            elif len(out) >= expected:
                return out
        raise AssertionError(f"{isolation} consumer read {out} within {POLL_BOUND_S} s")
    finally:
        consumer.close()


def test_confluent_transactions_commit_and_abort_read_committed_sees_commits(
    fresh_broker: BrokerProcess,
) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    bootstrap = fresh_broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, num_partitions=2, replication_factor=1)])[TOPIC].result(30)

    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "txn-e2e-1"})
    producer.init_transactions(30)

    def transaction(prefix: str, first: int, commit: bool) -> None:
        producer.begin_transaction()
        for i in range(first, first + 5):
            producer.produce(TOPIC, value=f"{prefix}{i}".encode(), partition=i % 2)
        if commit:
            producer.commit_transaction(30)
        else:
            producer.flush(30)  # the records are in the log before the abort marker follows them
            producer.abort_transaction(30)

    transaction("c", 0, commit=True)
    transaction("a", 0, commit=False)
    transaction("c", 5, commit=True)
    transaction("a", 5, commit=False)
    transaction("c", 10, commit=True)

    committed = sorted(_read(bootstrap, "read_committed", 15))
    expected = sorted((i % 2, f"c{i}".encode()) for i in range(15))
    assert committed == expected
    # Per partition in produce order (a consumer sees each partition in offset order).
    for p in (0, 1):
        values = [v for q, v in _read(bootstrap, "read_committed", 15) if q == p]
        assert values == [f"c{i}".encode() for i in range(15) if i % 2 == p]
    everything = _read(bootstrap, "read_uncommitted", 25)
    assert len(everything) == 25
    assert sum(1 for _, v in everything if v.startswith(b"a")) == 10
    fresh_broker.check_log()
