"""A broker restarted after kill -9 never answers Metadata from its empty cache (chaos bug 3).

A restarted controller listens and registers at once, but its previous session holds /controller until it
expires (zookeeper.session.timeout.ms): no controller sends it an UpdateMetadata before that. Before
the fix it answered Metadata in that window with no brokers and UNKNOWN_TOPIC_OR_PARTITION: librdkafka 2.x
then purged every broker it knew, failed the topic, and an idempotent producer never sent again. Now the
request waits for the controller's metadata (or, if none comes within CACHE_WAIT_S, the connection closes, so
the client asks another broker). A close is accepted only for that reason (the broker's log says so), and the
restarted broker must then answer a full Metadata: a broker that always closed would fail here.
Real ZooKeeper, two real kafkad processes, requests on the wire.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import pytest

from kafkad.protocol import ApiKey, ErrorCode
from kafkad.replication.broker_channel import BrokerChannel
from tests.chaos.workload import create_topic
from tests.cluster.cluster import KafkadCluster, wait_listening, wait_until
from tests.cluster.zookeeper import ZooKeeperServer

pytestmark = [pytest.mark.system, pytest.mark.timeout(180)]

TOPIC = "restarted"


async def _metadata(host: str, port: int) -> dict[str, Any] | None:
    """Metadata v8 for TOPIC; None if the broker closed the connection instead of answering."""
    ch = BrokerChannel(host, port, client_id="metadata-after-restart", request_timeout_ms=30000)
    try:
        body = {
            "topics": [{"name": TOPIC}],
            "allow_auto_topic_creation": False,
            "include_cluster_authorized_operations": False,
            "include_topic_authorized_operations": False,
        }
        return await ch.request(ApiKey.METADATA, 8, body)
    except ConnectionError:
        return None
    finally:
        ch.close()


def test_restarted_broker_never_answers_metadata_from_an_empty_cache(
    zk_server: ZooKeeperServer, kafkad_cluster: Callable[..., KafkadCluster]
) -> None:
    c = kafkad_cluster(zk_server.connect_string, 2)
    c.wait_registered([1, 2], timeout_s=60)
    c.wait_controller(timeout_s=60)
    create_topic(c.bootstrap, TOPIC, 2, 2)
    c.wait_until(lambda: c.leader_of(TOPIC, 1), 60, "a leader for the topic")
    bid = c.wait_controller(timeout_s=60)
    epoch = c.zk.controller_epoch()
    c.kill9(bid)
    b = c.broker(bid)
    # restart() returns after ZooKeeper registration; the request must go as soon as the port listens
    starting = threading.Thread(target=c.restart, args=(bid,), daemon=True)
    starting.start()
    wait_listening(b.host, b.port, 60.0)
    assert c.zk.controller_epoch() == epoch, "a new controller before the request: the window was missed"
    answer = asyncio.run(_metadata(b.host, b.port))
    starting.join(90)
    assert not starting.is_alive() and b.running
    if answer is None:  # closed instead: allowed only because no controller metadata came within the wait
        assert "no metadata from the controller within" in b.log_text(), b.log_text()[-4000:]
        answer = wait_until(
            lambda: asyncio.run(_metadata(b.host, b.port)), 60, "a Metadata answer from the restarted broker"
        )
    _full(answer)
    _full(asyncio.run(_metadata(b.host, b.port)))  # and it goes on answering


def _full(answer: dict[str, Any] | None) -> None:
    assert answer is not None, "the restarted broker closed the connection with its metadata in place"
    assert {x["node_id"] for x in answer["brokers"]} == {1, 2}, answer
    (t,) = answer["topics"]
    assert t["error_code"] == ErrorCode.NONE, t
    assert sorted(p["partition_index"] for p in t["partitions"]) == [0, 1], t
