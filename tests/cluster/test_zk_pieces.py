"""The ZooKeeper-facing pieces of zk/ and controller/ against a real ZooKeeper (no kafkad): the kazoo bridge, the
IsrWriter (replication's IsrUpdater) and producer-id blocks."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable

import pytest

from kafkad.cluster.isr_writer import IsrWriter
from kafkad.controller.admin import ZkProducerIds
from kafkad.replication.isr import LeaderAndIsr
from kafkad.zk import znodes as Z
from kafkad.zk.client import BadVersionError, CheckOp, CreateOp, NodeExistsError, SetOp, ZkClient
from tests.cluster.cluster import KafkadCluster
from tests.cluster.zookeeper import ZooKeeperServer

pytestmark = [pytest.mark.system, pytest.mark.timeout(60)]


def _client(zk: ZooKeeperServer, chroot: str) -> ZkClient:
    return ZkClient(zk.connect_string + chroot, session_timeout_ms=6000, connection_timeout_ms=10000)


def test_bridge_runs_callbacks_on_the_loop_and_multi_is_atomic(zk_server: ZooKeeperServer) -> None:
    async def go() -> None:
        zk = _client(zk_server, "/bridge")
        await zk.start()  # creates the chroot
        try:
            loop_thread = threading.get_ident()
            fired: asyncio.Future[tuple[str, int]] = asyncio.get_running_loop().create_future()
            await zk.create("/a", b"1")
            await zk.get("/a", watch=lambda e: fired.set_result((e.path, threading.get_ident())))
            await zk.set("/a", b"2")
            path, thread = await asyncio.wait_for(fired, 5)
            assert path == "/a" and thread == loop_thread
            stat = await zk.exists("/a")
            assert stat is not None
            with pytest.raises(BadVersionError):  # the check fails: nothing of the multi happens
                await zk.multi([CheckOp("/a", stat.version + 5), CreateOp("/b", b"x")])
            assert await zk.exists("/b") is None
            res = await zk.multi([CheckOp("/a", stat.version), CreateOp("/b", b"x"), SetOp("/a", b"3")])
            assert res[1] == "/b" and (await zk.get("/a"))[0] == b"3"
            with pytest.raises(NodeExistsError):
                await zk.create("/b")
            await zk.create("/c/d/e", makepath=True)
            await zk.delete_recursive("/c")
            assert await zk.exists("/c") is None
        finally:
            await zk.close()

    asyncio.run(go())


def test_isr_writer_conditional_fenced_and_notified(zk_server: ZooKeeperServer) -> None:
    async def go() -> None:
        zk = _client(zk_server, "/isr")
        await zk.start()
        try:
            await zk.ensure_path(Z.ISR_CHANGE_NOTIFICATION)
            path = Z.PartitionStateZNode.path("t", 0)
            await zk.create(
                path, Z.PartitionStateZNode.encode(Z.PartitionState(1, 3, (1, 2, 3), 5)), makepath=True
            )
            w = IsrWriter(zk, notify_delay_s=0.01)
            v = await w.update_isr("t", 0, LeaderAndIsr(1, 3, (1, 2), 5, 0))
            assert v == 1
            d = json.loads((await zk.get(path))[0])
            assert d["isr"] == [1, 2] and d["leader_epoch"] == 3 and d["leader"] == 1
            # a retry of the same write whose answer was lost: the znode already says so, that is success
            assert await w.update_isr("t", 0, LeaderAndIsr(1, 3, (1, 2), 5, 0)) == 1
            # the controller moved it meanwhile: fenced
            await zk.set(path, Z.PartitionStateZNode.encode(Z.PartitionState(2, 4, (2,), 6)))
            assert await w.update_isr("t", 0, LeaderAndIsr(1, 3, (1,), 5, 1)) is None
            await w.close()
            # the two successful writes are batched into one notification when they fall within
            # notify_delay_s of each other; a loaded machine may space them into two: both name t-0
            kids = await zk.children(Z.ISR_CHANGE_NOTIFICATION)
            assert 1 <= len(kids) <= 2 and all(k.startswith("isr_change_") for k in kids), kids
            for kid in kids:
                data = (await zk.get(f"{Z.ISR_CHANGE_NOTIFICATION}/{kid}"))[0]
                assert json.loads(data) == {"version": 1, "partitions": [{"topic": "t", "partition": 0}]}
        finally:
            await zk.close()

    asyncio.run(go())


def test_producer_id_blocks_never_overlap(zk_server: ZooKeeperServer) -> None:
    async def go() -> None:
        a, b = _client(zk_server, "/pids"), _client(zk_server, "/pids")
        await a.start()
        await b.start()
        try:
            pa, pb = ZkProducerIds(a, 1, block_size=10), ZkProducerIds(b, 2, block_size=10)
            got = await asyncio.gather(*(x.allocate() for _ in range(25) for x in (pa, pb)))
            assert len(set(got)) == 50
            block = Z.ProducerIdBlockZNode.decode((await a.get(Z.LATEST_PRODUCER_ID_BLOCK))[0])
            assert block is not None and block.end == 59  # 6 blocks of 10 claimed, contiguous
        finally:
            await a.close()
            await b.close()

    asyncio.run(go())


def test_generated_broker_id_from_seqid_is_kept(
    zk_server: ZooKeeperServer, kafkad_cluster: Callable[..., KafkadCluster]
) -> None:
    """broker.id=-1 in cluster mode: the id comes from /brokers/seqid (above reserved.broker.max.id) and
    stays across restarts (meta.properties)."""
    c = kafkad_cluster(zk_server.connect_string, 1, broker_overrides={1: {"broker.id": "-1"}})
    ids = c.wait_until(lambda: c.zk.broker_ids(), 30, "a registration")
    assert ids == [1001]
    assert "broker.id=1001" in (c.broker(1).data_dir / "meta.properties").read_text()
    c.restart(1)
    c.wait_until(lambda: c.zk.broker_ids() == [1001], 30, "the same id after a restart")
    assert c.zk.client.get("/brokers/seqid")[1].version == 1  # no second id was drawn
