"""confluent-kafka's transactional producer against a standalone broker (issue 20's first value): commits and
aborts, a read_committed consumer sees exactly the committed records, a second producer with the same
transactional id fences the first, and a transaction left open by a broker killed with -9 is aborted after
the restart when the producer comes back. Needs the partition side (txn-log's markers, LSO, read_committed).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.broker_process import BrokerProcess

pytestmark = pytest.mark.integration

WAIT_S = 60.0
TIMEOUT_S = 30.0


@pytest.fixture()
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    with BrokerProcess(tmp_path / "kafkad", {"num.partitions": "2"}) as b:
        yield b
        b.check_log()


def _create_topic(bootstrap: str, topic: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(TIMEOUT_S)


def _producer(bootstrap: str, txn_id: str) -> Any:
    from confluent_kafka import Producer

    return Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": txn_id, "transaction.timeout.ms": 60000}
    )


def _read(bootstrap: str, topic: str, isolation: str, expect: int) -> list[bytes]:
    """Every value of `topic` a fresh consumer reads from the start, waiting for `expect` of them and then
    until the end offsets are reached (so nothing beyond them is missed)."""
    from confluent_kafka import Consumer

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{uuid.uuid4()}",
            "isolation.level": isolation,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    try:
        c.subscribe([topic])
        values: list[bytes] = []
        eof: set[int] = set()
        deadline = time.monotonic() + WAIT_S
        while len(values) < expect or len(eof) < 2:
            assert time.monotonic() < deadline, f"read {values}, eof {eof}"
            m = c.poll(0.5)
            if m is None:
                continue
            err = m.error()
            partition = m.partition()
            assert partition is not None
            if err is not None:
                if err.code() == -191:  # _PARTITION_EOF
                    eof.add(partition)
                    continue
                raise AssertionError(err)
            eof.discard(partition)
            value = m.value()
            assert value is not None
            values.append(value)
        return values
    finally:
        c.close()


def test_commit_and_abort_read_committed_sees_exactly_the_committed(broker: BrokerProcess) -> None:
    bs = broker.bootstrap
    _create_topic(bs, "txn-e2e")
    p = _producer(bs, "txn-e2e")
    p.init_transactions(TIMEOUT_S)
    p.begin_transaction()
    for i in range(5):
        p.produce("txn-e2e", key=str(i).encode(), value=f"commit-1-{i}".encode())
    p.commit_transaction(TIMEOUT_S)
    p.begin_transaction()
    for i in range(4):
        p.produce("txn-e2e", key=str(i).encode(), value=f"abort-{i}".encode())
    p.flush(TIMEOUT_S)  # the aborted records are in the log
    p.abort_transaction(TIMEOUT_S)
    p.begin_transaction()
    p.produce("txn-e2e", key=b"x", value=b"commit-2")
    p.commit_transaction(TIMEOUT_S)
    committed = sorted([f"commit-1-{i}".encode() for i in range(5)] + [b"commit-2"])
    assert sorted(_read(bs, "txn-e2e", "read_committed", len(committed))) == committed
    everything = _read(bs, "txn-e2e", "read_uncommitted", 10)
    assert sorted(everything) == sorted(committed + [f"abort-{i}".encode() for i in range(4)])


def test_a_second_producer_fences_the_first(broker: BrokerProcess) -> None:
    from confluent_kafka import KafkaException

    bs = broker.bootstrap
    _create_topic(bs, "txn-fence")
    zombie = _producer(bs, "txn-fence")
    zombie.init_transactions(TIMEOUT_S)
    zombie.begin_transaction()
    zombie.produce("txn-fence", value=b"zombie")
    zombie.flush(TIMEOUT_S)
    fresh = _producer(bs, "txn-fence")
    fresh.init_transactions(TIMEOUT_S)  # aborts the zombie's transaction
    with pytest.raises(KafkaException) as info:
        zombie.commit_transaction(TIMEOUT_S)
    assert info.value.args[0].fatal(), info.value.args[0]
    fresh.begin_transaction()
    fresh.produce("txn-fence", value=b"fresh")
    fresh.commit_transaction(TIMEOUT_S)
    assert _read(bs, "txn-fence", "read_committed", 1) == [b"fresh"]


def test_open_transaction_of_a_killed_broker_is_aborted_after_restart(broker: BrokerProcess) -> None:
    bs = broker.bootstrap
    _create_topic(bs, "txn-kill")
    p = _producer(bs, "txn-kill")
    p.init_transactions(TIMEOUT_S)
    p.begin_transaction()
    p.produce("txn-kill", value=b"committed")
    p.commit_transaction(TIMEOUT_S)
    p.begin_transaction()
    p.produce("txn-kill", value=b"open")
    p.flush(TIMEOUT_S)
    broker.kill9()
    broker.restart()
    again = _producer(bs, "txn-kill")
    again.init_transactions(TIMEOUT_S)  # aborts the open one, then bumps
    again.begin_transaction()
    again.produce("txn-kill", value=b"after")
    again.commit_transaction(TIMEOUT_S)
    assert sorted(_read(bs, "txn-kill", "read_committed", 2)) == [b"after", b"committed"]
