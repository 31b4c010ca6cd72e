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
from kazoo.client import KazooClient

from kafkad.protocol import ApiKey
from kafkad.replication.broker_channel import BrokerChannel
from tests.cluster.cluster import KafkadCluster, wait_until
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


def fetch_body(topic: str, partition: int, offset: int, max_bytes: int, **extra: object) -> dict[str, Any]:
    """A consumer's Fetch (replica_id -1, no wait) of one partition; `extra` adds fields (rack_id)."""
    return {
        "replica_id": -1,
        "max_wait_ms": 0,
        "min_bytes": 0,
        **extra,
        "topics": [
            {
                "topic": topic,
                "partitions": [
                    {"partition": partition, "fetch_offset": offset, "partition_max_bytes": max_bytes}
                ],
            }
        ],
    }


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
    zk_any: Any, kafkad_cluster: Callable[..., KafkadCluster]
) -> None:
    zk_fixture = zk_any
    zk_kind = "zk_ensemble" if hasattr(zk_fixture, "wait_leader") else "zk_server"
    c = kafkad_cluster(zk_fixture.connect_string, 3)
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
    if zk_kind == "zk_ensemble":
        # losing the ZooKeeper leader: sessions move to the other servers, the controller stays, work goes on
        zk_fixture.node(zk_fixture.wait_leader()).kill9()
        zk_fixture.wait_leader(timeout_s=30)
        survivor = next(b for b in c.ids if b not in (controller, new_controller))
        res = create_topic(c.broker(survivor).bootstrap, "after-zk-loss", 2, 2)
        assert res["error_code"] == 0, res
        for p in range(2):
            c.wait_leader("after-zk-loss", p, timeout_s=20)
        assert c.controller_id() == new_controller


def _leaders(c: KafkadCluster, topic: str, n: int) -> dict[int, int]:
    out = {}
    for p in range(n):
        st = c.partition_state(topic, p)
        out[p] = st.leader if st is not None else -1
    return out


def test_leader_kill9_and_sigterm_move_leadership(
    zk_server: ZooKeeperServer, kafkad_cluster: Callable[..., KafkadCluster]
) -> None:
    c = kafkad_cluster(zk_server.connect_string, 3, overrides={"controlled.shutdown.retry.backoff.ms": "500"})
    c.wait_registered([1, 2, 3], timeout_s=30)
    controller = c.wait_controller(timeout_s=30)
    assert create_topic(c.broker(controller).bootstrap, "moves", 6, 3)["error_code"] == 0
    for p in range(6):
        c.wait_leader("moves", p, timeout_s=10)
    victim, survivor = [b for b in c.ids if b != controller]

    # kill -9 of a leader that is not the controller: its partitions get leaders from the ISR
    led = [p for p, leader in _leaders(c, "moves", 6).items() if leader == victim]
    assert led
    t0 = time.monotonic()
    c.kill9(victim)
    for p in led:
        st = c.wait_leader("moves", p, timeout_s=30, exclude=[victim])
        assert victim not in st.isr and st.leader in (controller, survivor)
    print(f"leader kill -9 -> new leaders: {time.monotonic() - t0:.2f}s")

    # SIGTERM of a leader: leadership moves while it is still registered. ZooKeeper delivers one client's
    # watch events in zxid order, so the order of the events below is the order of the writes.
    c.restart(victim)
    c.wait_registered([victim], timeout_s=30)
    led = [p for p, leader in _leaders(c, "moves", 6).items() if leader == survivor]
    assert led
    events: list[str] = []
    zk = KazooClient(hosts=c.zookeeper_connect)
    zk.start(timeout=15)
    try:
        for p in led:
            zk.get(
                f"/brokers/topics/moves/partitions/{p}/state", watch=lambda e, p=p: events.append(f"state{p}")
            )
        zk.exists(f"/brokers/ids/{survivor}", watch=lambda e: events.append("deregistered"))
        assert c.sigterm(survivor, timeout_s=60) == 0
        wait_until(lambda: "deregistered" in events, 30, "the broker's znode is gone")
    finally:
        zk.stop()
        zk.close()
    assert events.index("deregistered") == len(led), (
        f"leadership did not move before deregistration: {events}"
    )
    for p in led:
        now = c.partition_state("moves", p)
        assert now is not None and now.leader != survivor

        # (a follower may rejoin an ISR between its controlled shutdown and its exit; its loss removes it)
        def out_of_isr(p: int = p) -> bool:
            s = c.partition_state("moves", p)
            return s is not None and survivor not in s.isr

        c.wait_until(out_of_isr, 30, f"broker {survivor} out of the ISR of moves-{p}")
    assert "controlled shutdown succeeded" in c.broker(survivor).log_text()


def test_frozen_controller_is_fenced(
    zk_server: ZooKeeperServer, kafkad_cluster: Callable[..., KafkadCluster]
) -> None:
    from kafkad.controller.context import ControllerContext
    from kafkad.controller.partition_ops import ControllerMovedError, PartitionOps
    from kafkad.zk.client import SetOp, ZkClient

    c = kafkad_cluster(zk_server.connect_string, 3)
    c.wait_registered([1, 2, 3], timeout_s=30)
    old = c.wait_controller(timeout_s=30)
    epoch0 = c.zk.controller_epoch()
    assert epoch0 is not None
    _, epoch0_stat = c.zk.client.get("/controller_epoch")
    assert create_topic(c.broker(old).bootstrap, "frozen", 3, 3)["error_code"] == 0
    for p in range(3):
        c.wait_leader("frozen", p, timeout_s=10)
    old_broker_epoch = c.zk.broker_epoch(old)

    c.sigstop(old)  # frozen past zookeeper.session.timeout.ms (6 s): its session expires
    try:
        new = c.wait_controller(timeout_s=30, exclude=[old])
        assert (c.zk.controller_epoch() or 0) > epoch0
        for p in range(3):
            c.wait_leader("frozen", p, timeout_s=30, exclude=[old])
    finally:
        c.sigcont(old)
    # it comes back as a plain broker with a new session (new broker epoch), the new controller stays
    c.wait_until(
        lambda: c.zk.broker_epoch(old) not in (None, old_broker_epoch), 30, f"broker {old} registered again"
    )
    assert c.controller_id() == new
    c.wait_until(lambda: "resigns" in c.broker(old).log_text(), 10, f"broker {old} resigned as controller")

    # a request stamped with the old controller epoch is refused by the brokers
    target = next(b for b in c.ids if b != old)
    stale = {
        "controller_id": old,
        "controller_epoch": epoch0,
        "broker_epoch": -1,
        "type": 0,
        "topic_states": [],
        "live_leaders": [],
    }
    resp = request(c.broker(target).bootstrap, ApiKey.LEADER_AND_ISR, 5, stale)
    assert resp["error_code"] == 11  # STALE_CONTROLLER_EPOCH

    # and a ZooKeeper write fenced on the old /controller_epoch version fails (the old controller's path)
    async def stale_write() -> None:
        zk = ZkClient(c.zookeeper_connect, session_timeout_ms=6000, connection_timeout_ms=10000)
        await zk.start()
        try:
            ctx = ControllerContext(epoch=epoch0, epoch_zk_version=epoch0_stat.version)
            ops = PartitionOps(ctx, zk, old, lambda _t: False)
            path = "/brokers/topics/frozen/partitions/0/state"
            before = await zk.get(path)
            with pytest.raises(ControllerMovedError):
                await ops.fenced([SetOp(path, b'{"garbage":1}')])
            assert (await zk.get(path))[0] == before[0]
        finally:
            await zk.close()

    asyncio.run(stale_write())
