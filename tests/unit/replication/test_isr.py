"""ISR tracking on the leader: shrink after replica.lag.time.max.ms, expand when caught up, each through an
IsrUpdater (here an in-memory one: our own interface, conditional on the zkVersion as the znode write is),
fenced writes leave the ISR alone, and acks=all's NOT_ENOUGH_REPLICAS_AFTER_APPEND."""

from __future__ import annotations

import asyncio

import pytest

from kafkad.protocol.errors import ErrorCode, KafkaError
from kafkad.replication.isr import LeaderAndIsr
from kafkad.replication.partition import Partition
from tests.unit.replication.test_partition import Cfg, FakeLog

LAG_MS = 10_000


class MemoryIsrUpdater:
    """The partition state znode in memory: a write succeeds only on the current version."""

    def __init__(self, version: int = 5) -> None:
        self.version = version
        self.writes: list[LeaderAndIsr] = []

    async def update_isr(self, topic: str, partition: int, new: LeaderAndIsr) -> int | None:
        await asyncio.sleep(0)
        if new.zk_version != self.version:
            return None
        self.writes.append(new)
        self.version += 1
        return self.version


async def _settle(p: Partition) -> None:
    while p._isr_change is not None:
        await asyncio.sleep(0)


def _leader(updater: MemoryIsrUpdater, log: FakeLog | None = None) -> Partition:
    p = Partition(log or FakeLog(), broker_id=1)
    p.isr_updater = updater
    p.become_leader(4, isr=[1, 2, 3], replicas=[1, 2, 3], zk_version=5, controller_epoch=7, now_ms=1000)
    return p


def test_lagging_follower_leaves_the_isr_and_the_hw_moves() -> None:
    async def go() -> None:
        up = MemoryIsrUpdater()
        p = _leader(up)
        p.append_as_leader(memoryview(b"abc"), now_ms=1000, required_acks=1)
        p.update_follower_position(2, 3, now_ms=2000)  # caught up
        p.update_follower_position(3, 1, now_ms=2000)  # behind
        assert p.high_watermark == 1
        assert not p.maybe_shrink_isr(1000 + LAG_MS, LAG_MS)  # not lagging long enough yet
        assert p.maybe_shrink_isr(1001 + LAG_MS, LAG_MS)
        await _settle(p)
        assert up.writes == [LeaderAndIsr(1, 4, (1, 2), 7, 5)]
        assert p.isr == (1, 2) and p.zk_version == 6
        assert p.high_watermark == 3  # min LEO over the new ISR

    asyncio.run(go())


def test_follower_that_keeps_fetching_to_the_end_stays_in_sync() -> None:
    async def go() -> None:
        up = MemoryIsrUpdater()
        p = _leader(up)
        for t in range(0, 5 * LAG_MS, 1000):
            p.append_as_leader(memoryview(b"a"), now_ms=t, required_acks=1)
            for r in (2, 3):  # fetches reach the LEO the leader had at their previous fetch
                p.update_follower_position(r, p.log_end_offset - 1, now_ms=t)
        assert p.out_of_sync_replicas(5 * LAG_MS, LAG_MS) == ()

    asyncio.run(go())


def test_caught_up_follower_rejoins_and_a_fenced_write_changes_nothing() -> None:
    async def go() -> None:
        up = MemoryIsrUpdater()
        p = Partition(FakeLog(), broker_id=1)
        p.isr_updater = up
        p.become_leader(4, isr=[1], replicas=[1, 2], zk_version=5, now_ms=0)
        p.append_as_leader(memoryview(b"abcd"), now_ms=0, required_acks=1)
        p.update_follower_position(2, 2, now_ms=1)  # below the HW (4): stays out
        await _settle(p)
        assert up.writes == [] and list(p.isr) == [1]  # a list: mypy would narrow p.isr to tuple[int]
        p.update_follower_position(2, 4, now_ms=2)
        await _settle(p)
        assert p.isr == (1, 2) and up.writes[-1].isr == (1, 2)
        # the controller moved the znode meanwhile: our write is fenced, the ISR stays
        up.version = 100
        p.append_as_leader(memoryview(b"e"), now_ms=3, required_acks=1)
        assert p.maybe_shrink_isr(3 + LAG_MS + 10, LAG_MS)
        await _settle(p)
        assert p.isr == (1, 2) and p.zk_version == 6

    asyncio.run(go())


def test_no_updater_no_isr_change() -> None:
    p = Partition(FakeLog(), broker_id=1)
    p.become_leader(1, isr=[1, 2], replicas=[1, 2], now_ms=0)
    p.append_as_leader(memoryview(b"a"), now_ms=0, required_acks=1)
    assert not p.maybe_shrink_isr(10 * LAG_MS, LAG_MS)


def test_acks_all_answers_not_enough_replicas_after_append_when_the_isr_shrank() -> None:
    async def go() -> None:
        up = MemoryIsrUpdater()
        p = _leader(up, FakeLog(config=Cfg(min_insync_replicas=3)))
        p.append_as_leader(memoryview(b"ab"), now_ms=1000, required_acks=-1)
        waiter = asyncio.ensure_future(p.wait_replicated(1))
        p.update_follower_position(2, 2, now_ms=1000)
        assert p.maybe_shrink_isr(1001 + LAG_MS, LAG_MS)  # 3 never fetched
        await _settle(p)
        with pytest.raises(KafkaError) as e:
            await asyncio.wait_for(waiter, 30)
        assert e.value.code is ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        with pytest.raises(KafkaError) as e:
            p.append_as_leader(memoryview(b"c"), now_ms=1000, required_acks=-1)
        assert e.value.code is ErrorCode.NOT_ENOUGH_REPLICAS

    asyncio.run(go())
