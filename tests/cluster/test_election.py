"""Controller election and cluster-wide leadership with a real ZooKeeper and real kafkad processes (issue 10).

Everything is checked in ZooKeeper (Kafka's znodes) and through the Kafka wire: 3 brokers register with
their broker epochs, exactly one controller, a topic created with RF 3 from any broker gets Kafka's
assignment and a leader + full ISR per partition; kill -9 of the controller elects another one; kill -9 of a
leader moves its partitions' leadership; SIGTERM moves leadership before the process exits; a controller
frozen (SIGSTOP) past the session timeout stops acting and its stale writes are refused.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from kafkad.protocol import ApiKey
from kafkad.replication.broker_channel import BrokerChannel
from tests.cluster.cluster import KafkadCluster
from tests.cluster.zookeeper import ZooKeeperServer

pytestmark = [pytest.mark.system, pytest.mark.timeout(180)]


def request(bootstrap: str, api_key: int, version: int, body: Mapping[str, Any]) -> dict[str, Any]:
    host, port = bootstrap.rsplit(":", 1)

    async def go() -> dict[str, Any]:
        ch = BrokerChannel(host, int(port), client_id="test-election", request_timeout_ms=60000)
        try:
            return await ch.request(api_key, version, body)
        finally:
            ch.close()

    return asyncio.run(go())


def create_topic(bootstrap: str, name: str, partitions: int, rf: int) -> dict[str, Any]:
    body = {
        "topics": [
            {
                "name": name,
                "num_partitions": partitions,
                "replication_factor": rf,
                "assignments": [],
                "configs": [],
            }
        ],
        "timeout_ms": 30000,
        "validate_only": False,
    }
    resp = request(bootstrap, ApiKey.CREATE_TOPICS, 4, body)
    return dict(resp["topics"][0])


def test_register_elect_create_and_fail_over(
    zk_server: ZooKeeperServer, kafkad_cluster: Callable[..., KafkadCluster]
) -> None:
    c = kafkad_cluster(zk_server.connect_string, 3)
    c.wait_registered([1, 2, 3], timeout_s=30)
    epochs = {b: c.zk.broker_epoch(b) for b in c.ids}
    assert all(e is not None and e > 0 for e in epochs.values()) and len(set(epochs.values())) == 3
    controller = c.wait_controller(timeout_s=30)
    epoch0 = c.zk.controller_epoch()
    assert epoch0 is not None and epoch0 >= 1
    # created from a broker that is not the controller
    other = next(b for b in c.ids if b != controller)
    res = create_topic(c.broker(other).bootstrap, "rf3", 6, 3)
    assert res["error_code"] == 0, res
    assignment = c.zk.assignment("rf3")
    assert sorted(assignment) == list(range(6))
    assert all(sorted(r) == [1, 2, 3] for r in assignment.values())
    leaders = {r[0] for r in assignment.values()}
    assert leaders == {1, 2, 3}  # Kafka's round robin spreads the first replicas
    for p, reps in assignment.items():
        st = c.wait_leader("rf3", p, timeout_s=10)
        assert st.leader == reps[0] and sorted(st.isr) == [1, 2, 3] and st.controller_epoch == epoch0

    # kill -9 of the controller: another broker takes over with a higher epoch and re-elects its partitions
    led_by_controller = [p for p in assignment if c.partition_state("rf3", p).leader == controller]  # type: ignore[union-attr]
    t0 = time.monotonic()
    c.kill9(controller)
    new_controller = c.wait_controller(timeout_s=30, exclude=[controller])
    took = time.monotonic() - t0
    assert (c.zk.controller_epoch() or 0) > epoch0
    for p in led_by_controller:
        st = c.wait_leader("rf3", p, timeout_s=20, exclude=[controller])
        assert controller not in st.isr
    print(f"controller failover after kill -9: {took:.2f}s (new controller {new_controller})")
