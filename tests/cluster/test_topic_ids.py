"""KIP-516 in cluster mode (issue 23 item 3): a topic's id is the topic znode's topic_id, served by every
broker in Metadata v12 (whether it holds a replica or not), written into each replica's partition.metadata,
used by Fetch v13+, and the same after the controller is killed and its broker restarted.
Real ZooKeeper, three real kafkad processes, requests on the wire.
"""

from __future__ import annotations

import asyncio
import base64
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from kafkad.protocol import ApiKey, ErrorCode
from kafkad.replication.broker_channel import BrokerChannel
from tests.chaos.workload import create_topic
from tests.cluster.cluster import KafkadCluster
from tests.cluster.zookeeper import ZooKeeperServer

pytestmark = [pytest.mark.system, pytest.mark.timeout(240)]

TOPIC = "with-id"


async def _call(host: str, port: int, key: int, version: int, body: dict[str, Any]) -> dict[str, Any]:
    ch = BrokerChannel(host, port, client_id="topic-ids", request_timeout_ms=30000)
    try:
        out: dict[str, Any] = await ch.request(key, version, body)
        return out
    finally:
        ch.close()


def _metadata_id(c: KafkadCluster, bid: int, topic: str = TOPIC) -> uuid.UUID | None:
    b = c.broker(bid)
    body = {"topics": [{"name": topic, "topic_id": uuid.UUID(int=0)}], "allow_auto_topic_creation": False}
    out = asyncio.run(_call(b.host, b.port, ApiKey.METADATA, 12, body))
    (t,) = out["topics"]
    tid: uuid.UUID = t["topic_id"]
    return tid if t["error_code"] == ErrorCode.NONE and tid.int != 0 else None


def test_topic_ids_come_from_the_topic_znode(
    zk_server: ZooKeeperServer, kafkad_cluster: Callable[..., KafkadCluster]
) -> None:
    c = kafkad_cluster(zk_server.connect_string, 3)
    c.wait_registered([1, 2, 3], timeout_s=60)
    c.wait_controller(timeout_s=60)
    create_topic(c.bootstrap, TOPIC, 1, 2)
    leader = c.wait_until(lambda: c.leader_of(TOPIC, 0), 60, "a leader for the topic")
    znode = c.zk._json(f"/brokers/topics/{TOPIC}")
    assert znode is not None
    raw_id = znode[0]["topic_id"]
    expected = uuid.UUID(bytes=base64.urlsafe_b64decode(raw_id + "=" * (-len(raw_id) % 4)))
    for bid in (1, 2, 3):  # every broker, replica or not, once its metadata has the topic
        assert c.wait_until(lambda b=bid: _metadata_id(c, b), 60, f"broker {bid}'s topic id") == expected
    files = list(c.dir.rglob(f"{TOPIC}-0/partition.metadata"))
    assert len(files) == 2, files  # one per replica (RF 2)
    assert {f.read_text().split("topic_id: ")[1].strip() for f in files} == {raw_id}
    b = c.broker(leader)
    fetch = {
        "replica_id": -1,
        "max_wait_ms": 0,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "session_epoch": -1,
        "topics": [
            {
                "topic_id": expected,
                "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1024}],
            }
        ],
        "forgotten_topics_data": [],
    }
    got = asyncio.run(_call(b.host, b.port, ApiKey.FETCH, 13, fetch))["responses"][0]
    assert got["topic_id"] == expected and got["partitions"][0]["error_code"] == ErrorCode.NONE, got
    controller = c.wait_controller(timeout_s=60)
    c.kill9(controller)
    c.restart(controller)
    c.wait_controller(timeout_s=60)
    for bid in (1, 2, 3):
        assert (
            c.wait_until(lambda b=bid: _metadata_id(c, b), 90, f"broker {bid}'s id after failover")
            == expected
        )


def test_a_topic_znode_without_an_id_gets_one(
    zk_server: ZooKeeperServer, kafkad_cluster: Callable[..., KafkadCluster]
) -> None:
    """A topic znode written without topic_id (an older Kafka's, or a tool's): the controller gives it one
    (Kafka's KafkaController.setTopicIds) and every broker serves it."""
    c = kafkad_cluster(zk_server.connect_string, 2)
    c.wait_registered([1, 2], timeout_s=60)
    c.wait_controller(timeout_s=60)
    c.zk.client.create("/brokers/topics/legacy", b'{"version":1,"partitions":{"0":[1,2]}}')
    c.wait_until(lambda: c.leader_of("legacy", 0), 60, "a leader for the legacy topic")
    znode = c.wait_until(
        lambda: (z := c.zk._json("/brokers/topics/legacy")) and z[0].get("topic_id"), 60, "a topic_id"
    )
    expected = uuid.UUID(bytes=base64.urlsafe_b64decode(znode + "=" * (-len(znode) % 4)))
    for bid in (1, 2):
        got = c.wait_until(lambda b=bid: _metadata_id(c, b, "legacy"), 60, f"broker {bid}'s id")
        assert got == expected
