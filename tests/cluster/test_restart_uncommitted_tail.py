"""A leader restarted after kill -9 never serves its unreplicated tail to consumers (chaos bug 2).

The leader holds records its follower never fetched (acks=1 while the follower is frozen), is killed and
started again. Until the controller's LeaderAndIsr makes it a follower (and it truncates, or leads again
with that tail committed by the ISR) it must answer a consumer's Fetch v11 (which may read any replica,
KIP-392) only up to the high watermark it had checkpointed. Before bb6ae6e the loaded log's HW jumped to
its log end, and consumers read offsets that a new leader would then fill with other records. The
follower is also the controller, frozen: nothing reaches the restarted broker while the test reads it.
Real ZooKeeper, two real kafkad processes, real clients.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from kafkad.protocol import ApiKey, ErrorCode
from kafkad.replication.broker_channel import BrokerChannel
from kafkad.storage.checkpoints import read_offsets
from tests.cluster.cluster import KafkadCluster, wait_listening
from tests.cluster.zookeeper import ZooKeeperServer

pytestmark = [pytest.mark.system, pytest.mark.timeout(180)]

TOPIC = "tail"
COMMITTED = 5
TAIL = 5


def _produce(bootstrap: str, acks: str, n: int, first: int) -> list[int]:
    """`n` records, acknowledged with `acks`; their offsets."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 0, "message.timeout.ms": 20000})
    offsets: list[int] = []
    errors: list[Any] = []

    def done(err: Any, msg: Any) -> None:
        (errors.append(err) if err is not None else offsets.append(int(msg.offset())))

    for i in range(first, first + n):
        p.produce(TOPIC, f"r{i}".encode(), partition=0, on_delivery=done)
    assert p.flush(30) == 0 and not errors, errors
    return sorted(offsets)


async def _fetch(host: str, port: int, offset: int) -> dict[str, Any]:
    """A consumer's Fetch v11 (replica_id -1, no leader epoch) of partition 0 from `offset`."""
    ch = BrokerChannel(host, port, client_id="tail-reader", request_timeout_ms=10000)
    try:
        body = {
            "replica_id": -1,
            "max_wait_ms": 0,
            "min_bytes": 0,
            "topics": [
                {
                    "topic": TOPIC,
                    "partitions": [{"partition": 0, "fetch_offset": offset, "partition_max_bytes": 1 << 20}],
                }
            ],
        }
        resp = await ch.request(ApiKey.FETCH, 11, body)
        part: dict[str, Any] = resp["responses"][0]["partitions"][0]
        return part
    finally:
        ch.close()


def _size(records: Any) -> int:
    if not records:
        return 0
    if isinstance(records, (bytes, bytearray, memoryview)):
        return len(records)
    return sum(len(r) if isinstance(r, (bytes, bytearray, memoryview)) else int(r.size) for r in records)


def test_restarted_leader_serves_consumers_only_its_checkpointed_hw(
    zk_server: ZooKeeperServer, kafkad_cluster: Callable[..., KafkadCluster]
) -> None:
    c = kafkad_cluster(
        zk_server.connect_string,
        2,
        overrides={
            "zookeeper.session.timeout.ms": "15000",  # the frozen controller keeps its role meanwhile
            "replica.lag.time.max.ms": "60000",  # the frozen follower stays in the ISR
            "replica.high.watermark.checkpoint.interval.ms": "100",
        },
    )
    c.wait_registered([1, 2], timeout_s=60)
    follower = c.wait_controller(timeout_s=60)
    leader = 3 - follower
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    admin.create_topics([NewTopic(TOPIC, num_partitions=1, replica_assignment=[[leader, follower]])])[
        TOPIC
    ].result(60)
    c.wait_until(lambda: c.leader_of(TOPIC, 0) == leader, 60, "the preferred replica leads")
    c.wait_isr(TOPIC, 0, 2, timeout_s=60)
    assert _produce(c.bootstrap, "all", COMMITTED, 0) == list(range(COMMITTED))
    checkpoint = c.broker(leader).data_dir / "replication-offset-checkpoint"
    c.wait_until(
        lambda: checkpoint.exists() and read_offsets(checkpoint).get((TOPIC, 0)) == COMMITTED,
        30,
        f"the leader's checkpointed HW {COMMITTED}",
    )
    epoch = c.zk.controller_epoch()

    c.sigstop(follower)  # the follower (and controller) stops fetching: the tail stays unreplicated
    assert _produce(c.broker(leader).bootstrap, "1", TAIL, COMMITTED) == list(
        range(COMMITTED, COMMITTED + TAIL)
    )
    c.kill9(leader)
    b = c.broker(leader)
    starting = threading.Thread(target=c.restart, args=(leader,), daemon=True)
    starting.start()  # restart() returns after registration: read as soon as it listens
    wait_listening(b.host, b.port, 60.0)
    answers = [asyncio.run(_fetch(b.host, b.port, off)) for off in (0, COMMITTED)]
    assert c.zk.controller_epoch() == epoch, "the controller moved while reading: the window was missed"
    for part in answers:
        if part["error_code"] != ErrorCode.NONE:
            continue  # refusing is fine; serving the tail is not
        assert part["high_watermark"] <= COMMITTED, part
    assert answers[1]["error_code"] != ErrorCode.NONE or _size(answers[1]["records"]) == 0, answers[1]
    c.sigcont(follower)
    starting.join(90)
    assert not starting.is_alive() and b.running
