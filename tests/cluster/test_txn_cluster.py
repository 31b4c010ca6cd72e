"""Transactions on a replicated partition (3 brokers, RF 3): markers are written on the leader only
(a follower answers NOT_LEADER_OR_FOLLOWER) and replicated like any batch, so every follower serves the
same last stable offset and aborted transactions to read_committed consumers (KIP-392 follower fetch);
after kill -9 of the leader the new leader still holds the open transaction (its LSO stays) and ends it
with the next marker; the old leader comes back as a follower and agrees."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from kafkad.protocol import ErrorCode
from kafkad.tools.client import BrokerConnection, KafkaClient
from tests.cluster.cluster import KafkadCluster
from tests.cluster.zookeeper import ZooKeeperServer
from tests.integration import txn_wire as w

pytestmark = [pytest.mark.system, pytest.mark.timeout(300)]

TOPIC = "txn-replicated"
OVERRIDES = {"replica.fetch.wait.max.ms": "200", "replica.fetch.backoff.ms": "100"}


def _until(conn: BrokerConnection, hw: int, lso: int, aborted: list[dict[str, int]], what: str) -> None:
    """Wait (bounded) until `conn` serves read_committed with this HW, LSO and aborted list."""
    deadline = time.monotonic() + 60
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = w.fetch(conn, TOPIC, 1)
        except Exception as e:  # a broker still starting: its connection may be refused for a moment
            last = e
        else:
            got = (last["error_code"], last["high_watermark"], last["last_stable_offset"])
            if got == (0, hw, lso) and (last["aborted_transactions"] or []) == aborted:
                return
        time.sleep(0.1)
    raise AssertionError(f"{what}: {last}")


def _marker_landed(conn: BrokerConnection, pid: int) -> list[tuple[int, int, int]]:
    """Commit `pid`'s transaction, retried while the broker is not the leader yet (ZooKeeper names it
    before its LeaderAndIsr arrives), as a coordinator's marker sender retries until it lands."""
    deadline = time.monotonic() + 60
    while True:
        out = w.markers(conn, TOPIC, (pid, 0, True, [0]))
        if out[0][2] != ErrorCode.NOT_LEADER_OR_FOLLOWER or time.monotonic() > deadline:
            return out
        time.sleep(0.1)


def test_markers_replicate_and_survive_leader_failover(
    zk_server: ZooKeeperServer, kafkad_cluster: Callable[..., KafkadCluster]
) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    c = kafkad_cluster(zk_server.connect_string, 3, overrides=OVERRIDES)
    c.wait_registered([1, 2, 3], timeout_s=60)
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    admin.create_topics([NewTopic(TOPIC, num_partitions=1, replication_factor=3)])[TOPIC].result(60)
    leader = c.wait_isr(TOPIC, 0, 3).leader
    followers = [b for b in c.ids if b != leader]
    with KafkaClient(c.bootstrap) as client:
        client.metadata([TOPIC])
        lead = client.node(leader)
        aborter = w.producer(client, "tc-a", TOPIC)
        committer = w.producer(client, "tc-b", TOPIC)
        opener = w.producer(client, "tc-c", TOPIC)
        assert (
            w.produce(lead, TOPIC, w.batch(aborter, 0, [b"a0", b"a1", b"a2"], transactional=True), "tc-a")[
                "error_code"
            ]
            == 0
        )
        assert (
            w.produce(lead, TOPIC, w.batch(committer, 0, [b"b0", b"b1"], transactional=True), "tc-b")[
                "error_code"
            ]
            == 0
        )
        assert w.produce(lead, TOPIC, w.batch(-1, -1, [b"p0"], transactional=False), None)["base_offset"] == 5

        not_leader = w.markers(client.node(followers[0]), TOPIC, (aborter, 0, False, [0]))
        assert not_leader == [(aborter, 0, ErrorCode.NOT_LEADER_OR_FOLLOWER)]
        done = w.markers(lead, TOPIC, (aborter, 0, False, [0]), (committer, 0, True, [0]))
        assert done == [(aborter, 0, 0), (committer, 0, 0)]  # answered once the ISR has them
        assert (
            w.produce(lead, TOPIC, w.batch(opener, 0, [b"c0"], transactional=True), "tc-c")["base_offset"]
            == 8
        )

        aborted = [{"producer_id": aborter, "first_offset": 0}]
        for f in followers:
            _until(client.node(f), 9, 8, aborted, f"follower {f}")

    c.kill9(leader)
    new_leader = c.wait_leader(TOPIC, 0, exclude=[leader]).leader
    with KafkaClient(c.broker(new_leader).bootstrap) as client:  # not through the killed broker
        new = client.conn
        _until(new, 9, 8, aborted, f"new leader {new_leader}")  # the open transaction still holds the LSO
        assert _marker_landed(new, opener) == [(opener, 0, 0)]
        _until(new, 10, 10, aborted, f"new leader {new_leader} after the commit")

    c.restart(leader)
    c.wait_isr(TOPIC, 0, 3, timeout_s=120)
    with KafkaClient(c.broker(leader).bootstrap) as client:
        _until(client.conn, 10, 10, aborted, f"old leader {leader} as a follower")
