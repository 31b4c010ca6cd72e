"""Partition._advance_hw: the ISR = {self} short cut and the general minimum over the ISR."""

from __future__ import annotations

import asyncio

import pytest

from kafkad.protocol.errors import ErrorCode, KafkaError
from kafkad.replication.partition import Partition
from tests.unit.replication.test_partition import FakeLog


def test_isr_of_self_hw_is_the_leo_and_nothing_is_queued() -> None:
    log = FakeLog()
    p = Partition(log, broker_id=3)
    for n in (2, 1, 4):
        p.append_as_leader(memoryview(b"x" * n), now_ms=0, required_acks=1)
        assert log.high_watermark == log.log_end_offset
    assert log.high_watermark == 7
    assert p._hw_waiters == [] and p._data_waiters == set()


def test_single_isr_member_that_is_not_self_still_bounds_the_hw() -> None:
    log = FakeLog()
    p = Partition(log, broker_id=1)
    p.become_leader(1, isr=(2,), replicas=(1, 2))
    p.append_as_leader(memoryview(b"abcd"), now_ms=0, required_acks=1)
    assert log.high_watermark == 0
    p.update_follower_position(2, 3)
    assert log.high_watermark == 3


def test_hw_is_the_minimum_over_the_isr_and_completes_waiters_in_order() -> None:
    async def go() -> None:
        log = FakeLog()
        p = Partition(log, broker_id=1)
        p.become_leader(1, isr=(1, 2, 3), replicas=(1, 2, 3))
        p.append_as_leader(memoryview(b"abcdef"), now_ms=0, required_acks=-1)
        first = asyncio.ensure_future(p.wait_replicated(1))
        last = asyncio.ensure_future(p.wait_replicated(5))
        await asyncio.sleep(0)
        p.update_follower_position(2, 6)
        assert log.high_watermark == 0  # follower 3 is still at -1
        p.update_follower_position(3, 2)
        assert log.high_watermark == 2
        await asyncio.sleep(0)
        assert first.done() and not last.done()
        p.update_follower_position(3, 6)
        await asyncio.wait_for(last, 60)
        assert log.high_watermark == 6 and p._hw_waiters == []

    asyncio.run(go())


def test_a_wait_starting_after_the_partition_went_offline_or_lost_leadership_answers_at_once() -> None:
    """The produce handler's acks=all wait runs a loop iteration after its append; a pipelined request's
    I/O error (or a LeaderAndIsr) meanwhile failed the waiters there were: the late one must not park until
    the request times out (seen: a 30 s stall of a producer when a leader's log failed)."""

    async def go() -> None:
        for gone in ("offline", "follower"):
            p = Partition(FakeLog(), broker_id=1)
            p.become_leader(1, isr=(1, 2), replicas=(1, 2))
            p.append_as_leader(memoryview(b"ab"), now_ms=0, required_acks=-1)
            if gone == "offline":
                p.offline = True  # as ReplicaManager._went_offline leaves it
                p.wake_waiters()
                code = ErrorCode.KAFKA_STORAGE_ERROR
            else:
                p.become_follower(2, leader_id=2)
                code = ErrorCode.NOT_LEADER_OR_FOLLOWER
            with pytest.raises(KafkaError) as e:
                await asyncio.wait_for(p.wait_replicated(1), 5)
            assert e.value.code is code

    asyncio.run(go())


def test_a_leader_whose_isr_the_controller_shrinks_advances_its_hw_at_once() -> None:
    """LeaderAndIsr for a partition this broker already leads (new epoch, ISR without a stopped follower):
    what the leader knows of the remaining follower is kept (Kafka's makeLeader resets it for a new leader
    only), so an acks=all waiter the stopped follower held back is answered now, not after another fetch."""

    async def go() -> None:
        log = FakeLog()
        p = Partition(log, broker_id=1)
        p.become_leader(1, isr=(1, 2, 3), replicas=(1, 2, 3))
        p.append_as_leader(memoryview(b"abcdef"), now_ms=0, required_acks=-1)
        waiter = asyncio.ensure_future(p.wait_replicated(5))
        await asyncio.sleep(0)
        p.update_follower_position(2, 6)  # 3 (shutting down) fetches no more
        assert log.high_watermark == 0 and not waiter.done()
        p.become_leader(2, isr=(1, 2), replicas=(1, 2, 3))
        assert log.high_watermark == 6
        await asyncio.wait_for(waiter, 60)
        p.become_leader(3, isr=(1, 2, 3), replicas=(1, 2, 3))  # 3 is known not to have caught up
        p.append_as_leader(memoryview(b"gh"), now_ms=0, required_acks=-1)
        p.update_follower_position(2, 8)
        assert log.high_watermark == 6

    asyncio.run(go())


def test_a_followers_parked_fetch_wakes_on_appends_not_on_hw_moves() -> None:
    """A follower reads to the log end: another follower's report moving the HW brings it nothing, so its
    parked fetch stays parked (it was re-read once per report); an append or a role change wakes it."""

    async def go() -> None:
        log = FakeLog()
        p = Partition(log, broker_id=1)
        p.become_leader(1, isr=(1, 2, 3), replicas=(1, 2, 3))
        p.append_as_leader(memoryview(b"abcd"), now_ms=0, required_acks=-1)
        loop = asyncio.get_running_loop()
        follower, consumer = loop.create_future(), loop.create_future()
        p.add_append_waiter(follower)
        p.add_data_waiter(consumer)
        p.update_follower_position(2, 4)
        p.update_follower_position(3, 4)
        assert log.high_watermark == 4 and consumer.done() and not follower.done()
        p.append_as_leader(memoryview(b"ef"), now_ms=0, required_acks=-1)
        await asyncio.sleep(0)  # an append settles it on the next iteration (delayed_fetch._settle)
        assert follower.done()
        p.discard_append_waiter(follower)
        again = loop.create_future()
        p.add_append_waiter(again)
        p.become_follower(2, 2)
        assert again.done()

    asyncio.run(go())


def test_wait_replicated_times_out_on_its_own_timer_and_forgets_the_waiter() -> None:
    async def go() -> None:
        log = FakeLog()
        p = Partition(log, broker_id=1)
        p.become_leader(1, isr=(1, 2), replicas=(1, 2))
        p.append_as_leader(memoryview(b"abcd"), now_ms=0, required_acks=-1)
        with pytest.raises(TimeoutError):
            await p.wait_replicated(3, 0.01)
        assert p._hw_waiters == []
        waiting = asyncio.ensure_future(p.wait_replicated(3, 60))
        await asyncio.sleep(0)
        p.update_follower_position(2, 4)
        await asyncio.wait_for(waiting, 60)

    asyncio.run(go())


def test_one_timer_expires_waiters_of_different_timeouts_each_at_its_deadline() -> None:
    async def go() -> None:
        log = FakeLog()
        p = Partition(log, broker_id=1)
        p.become_leader(1, isr=(1, 2), replicas=(1, 2))
        p.append_as_leader(memoryview(b"abcd"), now_ms=0, required_acks=-1)
        long = asyncio.ensure_future(p.wait_replicated(3, 60))
        await asyncio.sleep(0)
        armed = p._hw_timer
        short = asyncio.ensure_future(p.wait_replicated(3, 0.05))  # earlier than the armed one: re-armed
        mid = asyncio.ensure_future(p.wait_replicated(3, 0.2))
        await asyncio.sleep(0)
        assert p._hw_timer is not armed
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(short, 30)
        assert not mid.done() and not long.done()
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(mid, 30)
        assert not long.done()
        p.update_follower_position(2, 4)
        await asyncio.wait_for(long, 30)
        assert p._hw_waiters == []

    asyncio.run(go())


def test_waiters_completed_in_time_arm_no_timer_of_their_own() -> None:
    """A steady flow of acks=-1 waits shares the partition's one timer (armed at the first deadline)."""

    async def go() -> None:
        log = FakeLog()
        p = Partition(log, broker_id=1)
        p.become_leader(1, isr=(1, 2), replicas=(1, 2))
        armed = None
        for _ in range(50):
            p.append_as_leader(memoryview(b"abcd"), now_ms=0, required_acks=-1)
            end = log.log_end_offset
            waiting = asyncio.ensure_future(p.wait_replicated(end - 1, 30))
            await asyncio.sleep(0)
            armed = armed or p._hw_timer
            assert armed is not None and p._hw_timer is armed
            p.update_follower_position(2, end)
            await asyncio.wait_for(waiting, 30)
        assert p._hw_waiters == []

    asyncio.run(go())
