"""The transaction coordinator on a 3-broker cluster (issue 20 item 2): it follows `__transaction_state`
leadership, its markers reach partition leaders on other brokers (WriteTxnMarkers), and when the
coordinator's broker is killed with -9 a new leader of the id's partition loads the state and the
producer's next transactions commit; a read_committed consumer then sees exactly the committed records.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from kafkad.coordinator.transaction.records import partition_for
from tests.cluster.cluster import KafkadCluster
from tests.cluster.zookeeper import ZooKeeperServer
from tests.integration.raw_client import Raw

pytestmark = [pytest.mark.system, pytest.mark.timeout(420)]

TXN_PARTITIONS = 3
TIMEOUT_S = 60.0


def _producer(bootstrap: str, txn_id: str) -> Any:
    from confluent_kafka import Producer

    return Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": txn_id,
            "transaction.timeout.ms": 60000,
            "acks": "all",
        }
    )


def _coordinator(c: KafkadCluster, txn_id: str) -> int:
    """The coordinator FindCoordinator names, once every broker agrees it leads the id's partition."""

    def found() -> int | None:
        leader = c.leader_of("__transaction_state", partition_for(txn_id, TXN_PARTITIONS))
        if leader is None or leader not in c.running_ids():
            return None
        raw = Raw(c.broker(leader).port)
        try:
            resp = raw.call(10, 3, {"key": txn_id, "key_type": 1})
        finally:
            raw.close()
        return leader if resp["error_code"] == 0 and resp["node_id"] == leader else None

    return c.wait_until(found, TIMEOUT_S, "a transaction coordinator")


def _read_committed(bootstrap: str, topic: str, expect: int, partitions: int = 3) -> list[bytes]:
    from confluent_kafka import Consumer

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{uuid.uuid4()}",
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    try:
        c.subscribe([topic])
        values: list[bytes] = []
        eof: set[int] = set()
        deadline = time.monotonic() + TIMEOUT_S
        while len(values) < expect or len(eof) < partitions:
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


def _transaction(p: Any, topic: str, tag: str, commit: bool) -> list[bytes]:
    p.begin_transaction()
    values = [f"{tag}-{i}".encode() for i in range(6)]
    for i, v in enumerate(values):
        p.produce(topic, value=v, partition=i % 3)
    if commit:
        p.commit_transaction(TIMEOUT_S)
        return values
    p.flush(TIMEOUT_S)
    p.abort_transaction(TIMEOUT_S)
    return []


def test_coordinator_failover_kill9(
    zk_server: ZooKeeperServer, kafkad_cluster: Callable[..., KafkadCluster]
) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    c = kafkad_cluster(
        zk_server.connect_string,
        3,
        overrides={
            "transaction.state.log.num.partitions": str(TXN_PARTITIONS),
            "transaction.state.log.replication.factor": "3",
            "transaction.state.log.min.isr": "2",
        },
    )
    c.wait_registered([1, 2, 3], timeout_s=60)
    c.wait_controller(timeout_s=60)
    topic = "txn-failover"
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    new = NewTopic(topic, num_partitions=3, replication_factor=3, config={"min.insync.replicas": "2"})
    admin.create_topics([new])[topic].result(60)
    for i in range(3):
        c.wait_isr(topic, i, 3, timeout_s=60)
    txn_id = "txn-failover-producer"
    p = _producer(c.bootstrap, txn_id)
    p.init_transactions(TIMEOUT_S)
    committed = _transaction(p, topic, "before", commit=True)
    _transaction(p, topic, "aborted", commit=False)
    coordinator = _coordinator(c, txn_id)
    for i in range(TXN_PARTITIONS):
        c.wait_isr("__transaction_state", i, 3, timeout_s=60)
    c.kill9(coordinator)
    # the producer finds the new coordinator (another replica of the id's partition) and goes on
    committed += _transaction(p, topic, "after", commit=True)
    assert _coordinator(c, txn_id) != coordinator
    _transaction(p, topic, "aborted-after", commit=False)
    committed += _transaction(p, topic, "last", commit=True)
    assert sorted(_read_committed(c.bootstrap, topic, len(committed))) == sorted(committed)
    c.restart(coordinator)  # back as a follower: it loads nothing it does not lead, and logs no error
    c.wait_isr("__transaction_state", partition_for(txn_id, TXN_PARTITIONS), 3, timeout_s=90)


def test_markers_are_retried_until_the_leader_returns(
    zk_server: ZooKeeperServer, kafkad_cluster: Callable[..., KafkadCluster]
) -> None:
    """A commit whose partition's only replica is down: EndTxn is answered (PrepareCommit is logged), the
    marker is retried while the partition has no leader, and lands once its broker is back."""
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    c = kafkad_cluster(
        zk_server.connect_string,
        3,
        overrides={
            "transaction.state.log.num.partitions": str(TXN_PARTITIONS),
            # RF 2: the broker that goes down holds no replica of the id's partition, so the commit's
            # PrepareCommit is replicated and answered while the marker cannot land
            "transaction.state.log.replication.factor": "2",
        },
    )
    c.wait_registered([1, 2, 3], timeout_s=60)
    c.wait_controller(timeout_s=60)
    txn_id = "txn-retry-producer"
    p = _producer(c.bootstrap, txn_id)
    p.init_transactions(TIMEOUT_S)
    coordinator = _coordinator(c, txn_id)
    holders = c.replicas_of("__transaction_state", partition_for(txn_id, TXN_PARTITIONS))
    lonely = next(b for b in c.ids if b not in holders)
    topic = "txn-retry"
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=1, replica_assignment=[[lonely]])])[topic].result(60)
    c.wait_leader(topic, 0, timeout_s=60)
    p.begin_transaction()
    p.produce(topic, value=b"held", partition=0)
    p.flush(TIMEOUT_S)
    c.kill9(lonely)
    p.commit_transaction(TIMEOUT_S)  # answered once PrepareCommit is in __transaction_state

    def state() -> str:
        raw = Raw(c.broker(coordinator).port)
        try:
            d = raw.call(65, 0, {"transactional_ids": [txn_id]})["transaction_states"][0]
        finally:
            raw.close()
        return str(d["transaction_state"])

    assert state() == "PrepareCommit"  # the marker cannot land: its partition has no leader
    c.restart(lonely)
    c.wait_until(lambda: state() == "CompleteCommit", TIMEOUT_S, "the retried marker to land")
    assert _read_committed(c.bootstrap, topic, 1, partitions=1) == [b"held"]
