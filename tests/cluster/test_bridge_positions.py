"""The bridge's shipped positions in a real ZooKeeper: one znode per partition, fenced by the leader epoch."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import pytest

from kafkad.spark_bridge.zk_position import ZkPositionStore, decode, position_path
from kafkad.zk.client import ZkClient
from tests.cluster.zookeeper import ZooKeeperServer

pytestmark = [pytest.mark.system, pytest.mark.timeout(120)]


@pytest.fixture()
def zk_loop(zk_server: ZooKeeperServer) -> Iterator[tuple[ZkClient, asyncio.AbstractEventLoop]]:
    """A ZkClient on an event loop running in its own thread (as the daemon's loop is to the shipper)."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()

    async def connect() -> ZkClient:
        zk = ZkClient(
            f"{zk_server.connect_string}/bridge-test", session_timeout_ms=6000, connection_timeout_ms=15000
        )
        await zk.start()
        return zk

    zk = asyncio.run_coroutine_threadsafe(connect(), loop).result(60)
    try:
        yield zk, loop
    finally:
        asyncio.run_coroutine_threadsafe(zk.close(), loop).result(60)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


def test_leader_advances_follower_reads_new_leader_fences_old(
    zk_loop: tuple[ZkClient, asyncio.AbstractEventLoop],
) -> None:
    zk, loop = zk_loop
    epochs: dict[int, int | None] = {1: 5, 2: None}  # broker -> its leader epoch of t-0 (None: follower)
    stores = {b: ZkPositionStore(zk, loop, lambda t, p, b=b: epochs[b], b) for b in (1, 2)}  # type: ignore[misc]
    old, new = stores[1], stores[2]
    assert old.may_ship("t", 0) and not new.may_ship("t", 0)
    assert old.position("t", 0) is None
    assert old.advance("t", 0, 100) and old.position("t", 0) == 100
    assert not new.advance("t", 0, 500)  # not the leader: refused, nothing written
    new.refresh("t", 0)
    assert new.position("t", 0) == 100  # a follower's retention gate sees the cluster-wide position
    assert old.advance("t", 0, 50) and old.position("t", 0) == 100  # never lowered

    epochs[1], epochs[2] = 5, 6  # leadership moved; the old leader does not know yet
    assert new.may_ship("t", 0)
    assert new.advance("t", 0, 180)
    assert not old.advance("t", 0, 400)  # fenced: the znode carries epoch 6
    data = asyncio.run_coroutine_threadsafe(zk.get(position_path("t", 0)), loop).result(30)[0]
    stored = decode(data)
    assert (stored.next_offset, stored.leader_epoch, stored.broker) == (180, 6, 2)
    assert old.position("t", 0) == 180  # the fenced store learned the newer position


def test_concurrent_advances_of_one_epoch_keep_the_max(
    zk_loop: tuple[ZkClient, asyncio.AbstractEventLoop],
) -> None:
    """Two writers racing on the znode version (a leader's retries): conditional writes, nothing lost."""
    zk, loop = zk_loop
    a = ZkPositionStore(zk, loop, lambda t, p: 1, 1, attempts=50)
    b = ZkPositionStore(zk, loop, lambda t, p: 1, 1, attempts=50)
    results: list[bool] = []

    def run(store: ZkPositionStore, start: int) -> None:
        for i in range(start, 200, 2):
            results.append(store.advance("r", 3, i))

    threads = [threading.Thread(target=run, args=(a, 0)), threading.Thread(target=run, args=(b, 1))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert all(results) and len(results) == 200
    a.refresh("r", 3)
    assert a.position("r", 3) == 199
