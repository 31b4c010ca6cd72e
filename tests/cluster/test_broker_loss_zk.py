"""The controller's broker-loss path against a real ZooKeeper: the writes batched in fenced multis (one per
WRITE_BATCH partitions), no reads when the context's zkVersion is current, and only the partitions a leader
moved meanwhile are re-read (a batch whose multi failed on one goes one partition at a time)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kafkad.controller.context import TP, ControllerContext
from kafkad.controller.partition_ops import WRITE_BATCH, PartitionOps
from kafkad.controller.state_machines import PartitionStateName
from kafkad.zk import znodes as Z
from kafkad.zk.client import ZkClient
from tests.cluster.zookeeper import ZooKeeperServer

pytestmark = [pytest.mark.system, pytest.mark.timeout(60)]

N = 60  # partitions, RF 3 on brokers 1, 2, 3; broker 1 leads the even ones, broker 2 the odd ones


class CountingZk(ZkClient):
    """Counts the requests sent to ZooKeeper (a multi is one), by kind of call."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.calls: dict[str, int] = {}

    def count(self, kind: str) -> None:
        self.calls[kind] = self.calls.get(kind, 0) + 1

    async def get(self, path: str, watch: Any = None) -> Any:
        self.count("get")
        return await super().get(path, watch)

    async def exists(self, path: str, watch: Any = None) -> Any:
        self.count("exists")
        return await super().exists(path, watch)

    async def multi(self, ops: Any) -> list[Any]:
        self.count("multi")
        return await super().multi(ops)


async def _setup(zk: ZkClient) -> ControllerContext:
    ctx = ControllerContext(epoch=4)
    await zk.create(Z.CONTROLLER_EPOCH, b"4")
    stat = await zk.exists(Z.CONTROLLER_EPOCH)
    assert stat is not None
    ctx.epoch_zk_version = stat.version
    for b in (1, 2, 3):
        ctx.live_brokers[b] = Z.BrokerInfo(b, "127.0.0.1", 9000 + b, None, epoch=b)
    for p in range(N):
        tp: TP = ("t", p)
        reps = (1, 2, 3) if p % 2 == 0 else (2, 1, 3)
        st = Z.PartitionState(reps[0], 7, reps, 3)
        path = Z.PartitionStateZNode.path(*tp)
        await zk.create(path, Z.PartitionStateZNode.encode(st), makepath=True)
        ctx.assignment[tp] = reps
        ctx.leaders[tp] = st
        ctx.partition_states[tp] = PartitionStateName.ONLINE
    return ctx


async def _state(zk: ZkClient, p: int) -> Z.PartitionState:
    data, stat = await zk.get(Z.PartitionStateZNode.path("t", p))
    return Z.PartitionStateZNode.decode(data, stat.version)


def test_broker_loss_writes_each_partition_once_and_rereads_only_moved_ones(
    zk_server: ZooKeeperServer,
) -> None:
    async def go() -> None:
        zk = CountingZk(
            zk_server.connect_string + "/loss", session_timeout_ms=6000, connection_timeout_ms=10000
        )
        await zk.start()
        try:
            ctx = await _setup(zk)
            # Meanwhile the leader of partition 1 shrank its ISR in ZooKeeper (the controller has not
            # seen the notification yet): the controller's write there must fail and be decided again.
            await zk.set(
                Z.PartitionStateZNode.path("t", 1),
                Z.PartitionStateZNode.encode(Z.PartitionState(2, 7, (2, 1), 3)),
            )
            ops = PartitionOps(ctx, zk, controller_id=2, unclean_allowed=lambda _t: False)
            del ctx.live_brokers[1]
            zk.calls.clear()
            await ops.on_broker_failure([1])
            # The batched multi of all N fails on the moved one (its epoch check: exists), so that batch goes
            # one fenced multi per partition; for the moved one the failed multi, the epoch check, its
            # re-read (get) and the write again. The first path made 3 requests per partition (a read, the
            # write, the re-read of the state it had just written).
            assert N <= WRITE_BATCH
            assert zk.calls == {"multi": 1 + N + 1, "exists": 2, "get": 1}, zk.calls
            for p in range(N):
                st = await _state(zk, p)
                assert ctx.leaders[("t", p)] == st
                if p % 2 == 0:  # it led: a new leader and the dead broker out of the ISR in one write
                    assert (st.leader, st.leader_epoch, st.isr) == (2, 8, (2, 3)), (p, st)
                elif p == 1:
                    assert (st.leader, st.leader_epoch, st.isr) == (2, 8, (2,)), st
                else:  # it followed: only out of the ISR
                    assert (st.leader, st.leader_epoch, st.isr) == (2, 8, (2, 3)), (p, st)
                assert st.controller_epoch == 4 and st.zk_version == 1 + (p == 1)
                assert ctx.partition_states[("t", p)] is PartitionStateName.ONLINE
            # a second loss right after: the context's zkVersions are current, no read for a partition that
            # is written; partition 1's ISR holds no 3 any more in the context, and that "nothing to do" is
            # confirmed by one read (a leader may have put 3 back meanwhile, not yet notified: 2ece008)
            del ctx.live_brokers[3]
            zk.calls.clear()
            await ops.on_broker_failure([3])
            assert zk.calls == {"multi": 1, "get": 1}, zk.calls  # N - 1 writes in one multi, N - 1 before
        finally:
            await zk.close()

    asyncio.run(go())
