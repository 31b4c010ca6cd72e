"""A controller failover interrupted by ZooKeeper (connection lost while it loads the cluster state) is redone
by the re-election; the channel the interrupted one opened (a sender task per live broker) must be closed,
not dropped: a pending task garbage-collected is asyncio's ERROR 'Task was destroyed but it is pending!'."""

from __future__ import annotations

import asyncio
import gc
import logging

import pytest
from kazoo.exceptions import ConnectionLoss

from kafkad.zk import znodes as Z
from kafkad.zk.client import Watch
from tests.unit.election.fake_zk import FakeZk
from tests.unit.election.test_controller_session import _active_controller, _cluster_zk, _until


class _DropsOnce(FakeZk):
    """Loses the connection once, on the failover's read of /brokers/topics (the session survives)."""

    dropped = False

    async def children(self, path: str, watch: Watch | None = None) -> list[str]:
        if path == Z.BROKER_TOPICS and not self.dropped:
            self.dropped = True
            raise ConnectionLoss()
        return await super().children(path, watch)


def test_an_interrupted_failover_leaves_no_pending_sender_behind(caplog: pytest.LogCaptureFixture) -> None:
    async def main() -> None:
        base = await _cluster_zk()  # broker 1 registered, topic t
        zk = _DropsOnce(nodes=base.nodes, zxid=base.zxid)
        c = await _active_controller(zk)  # the first failover failed, the re-election took over
        assert zk.dropped
        await _until(lambda: len(c.ctx.leaders) == 2, "partitions loaded")
        for _ in range(5):
            await asyncio.sleep(0)
        gc.collect()
        await c.close()

    with caplog.at_level(logging.ERROR, logger="asyncio"):
        asyncio.run(main())
    assert [r.getMessage() for r in caplog.records if "destroyed but it is pending" in r.getMessage()] == []
