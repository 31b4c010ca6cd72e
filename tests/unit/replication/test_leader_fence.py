"""LeaderFence: a gap in the event loop's ticks (a frozen process) refuses Produce until the session is
confirmed or the controller addresses a newer registration; a lost session voids confirmations."""

from __future__ import annotations

import asyncio

import pytest

from kafkad.protocol.errors import ErrorCode, KafkaError
from kafkad.replication.leader_fence import LeaderFence


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _refused(fence: LeaderFence) -> bool:
    try:
        fence.check()
    except KafkaError as e:
        assert e.code is ErrorCode.NOT_LEADER_OR_FOLLOWER
        return True
    return False


def _fence(clock: Clock, started: list[int]) -> LeaderFence:
    fence = LeaderFence(2.0, clock=clock, on_fence=started.append)
    fence.broker_epoch = 10
    return fence


def test_a_request_read_before_the_first_tick_after_a_freeze_is_refused() -> None:
    clock, started = Clock(), list[int]()
    fence = _fence(clock, started)
    clock.now += 1.9
    assert not _refused(fence)  # shorter than half the session: the session cannot be gone
    clock.now += 0.2  # 2.1 s since the last tick: the check itself sees it
    assert _refused(fence) and fence.fenced and started == [1]
    clock.now += 0.01
    assert _refused(fence)  # sticky, whatever the clock says now
    assert started == [1]  # one confirmation per fence


def test_the_tick_fences_on_a_gap_and_a_confirmation_of_that_fence_lifts_it() -> None:
    async def run() -> None:
        clock, started = Clock(), list[int]()
        fence = LeaderFence(2.0, tick_s=0.01, clock=clock, on_fence=started.append)
        fence.start()
        try:
            clock.now += 5
            while not fence.fenced:
                await asyncio.sleep(0.005)
            assert started == [1] and _refused(fence)
            fence.confirm(started[0])
            assert not fence.fenced and not _refused(fence)
        finally:
            fence.stop()

    asyncio.run(run())


def test_a_confirmation_of_an_earlier_fence_or_after_a_lost_session_lifts_nothing() -> None:
    clock, started = Clock(), list[int]()
    fence = _fence(clock, started)
    fence.fence("frozen")
    fence.confirm(started[0])
    fence.fence("frozen again")
    assert started == [1, 2]
    fence.confirm(1)  # the first freeze's read came back late
    assert fence.fenced
    fence.fence("session expired", session_lost=True)  # while the second confirmation runs
    assert started == [1, 2]  # nothing to confirm: only the controller can lift it now
    fence.confirm(2)
    assert fence.fenced and _refused(fence)


@pytest.mark.parametrize("session_lost", [False, True])
def test_only_a_leader_and_isr_for_a_newer_registration_lifts_it(session_lost: bool) -> None:
    clock, started = Clock(), list[int]()
    fence = _fence(clock, started)
    fence.fence("why", session_lost=session_lost)
    fence.on_leader_and_isr(10)  # addressed to the registration it had: sent before the freeze
    fence.on_leader_and_isr(-1)  # a version without the broker epoch
    assert fence.fenced
    fence.broker_epoch = 17  # re-registered
    fence.on_leader_and_isr(17)
    assert not fence.fenced and not _refused(fence)
