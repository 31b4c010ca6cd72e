import logging

import pytest

from kafkad.coordinator.group import GroupState
from kafkad.protocol.errors import ErrorCode as E
from kafkad.protocol.errors import KafkaError
from tests.unit.groups.harness import Harness


def test_heartbeat_errors_by_state() -> None:
    h = Harness()
    a, b = h.stable_group(2)
    assert h.coord.heartbeat("g", 1, a, None) == E.NONE
    assert h.coord.heartbeat("g", 0, a, None) == E.ILLEGAL_GENERATION
    assert h.coord.heartbeat("g", 1, "ghost", None) == E.UNKNOWN_MEMBER_ID
    assert h.coord.heartbeat("other", 1, a, None) == E.UNKNOWN_MEMBER_ID
    h.join()  # a third member: rebalance
    assert h.coord.heartbeat("g", 1, b, None) == E.REBALANCE_IN_PROGRESS


def test_session_expiry_removes_member_and_rebalances() -> None:
    h = Harness()
    a, b = h.stable_group(2)
    h.sched.advance(9_000)
    assert h.coord.heartbeat("g", 1, a, None) == E.NONE
    group = h.coord.groups["g"]
    assert b in group.members
    h.sched.advance(1_000)
    # b never heartbeated: gone after its 10 s session, the group rebalances
    assert b not in group.members
    assert group.state is GroupState.PREPARING_REBALANCE
    assert h.coord.heartbeat("g", 1, a, None) == E.REBALANCE_IN_PROGRESS
    ra = h.join(a)
    assert ra.j.generation_id == 2 and len(ra.j.members) == 1


def test_member_parked_in_join_is_not_expired() -> None:
    h = Harness()
    a, b = h.stable_group(2)
    ra = h.join(a)
    h.sched.advance(9_000)
    assert h.coord.heartbeat("g", 1, b, None) == E.REBALANCE_IN_PROGRESS
    rb_box = h.join(b)
    assert ra.j.generation_id == rb_box.j.generation_id == 2


def test_last_member_leaving_empties_group() -> None:
    h = Harness()
    (a,) = h.stable_group(1)
    assert h.coord.leave_group("g", [(a, None)]) == (E.NONE, [E.NONE])
    group = h.coord.groups["g"]
    assert group.state is GroupState.EMPTY and group.generation_id == 2
    assert h.coord.leave_group("g", [(a, None)]) == (E.NONE, [E.UNKNOWN_MEMBER_ID])


def test_batched_leave_v3_per_member_errors() -> None:
    h = Harness()
    a, b, c = h.stable_group(3)
    top, per = h.coord.leave_group("g", [(a, None), ("ghost", None), (b, None)])
    assert top == E.NONE and per == [E.NONE, E.UNKNOWN_MEMBER_ID, E.NONE]
    assert list(h.coord.groups["g"].members) == [c]


def test_leave_of_parked_joiner_answers_it() -> None:
    h = Harness()
    a, _ = h.stable_group(2)
    ra = h.join(a)
    h.coord.leave_group("g", [(a, None)])
    assert ra.j.error == E.UNKNOWN_MEMBER_ID


def test_stop_answers_parked_requests_and_cancels_timers() -> None:
    h = Harness()
    a, _ = h.stable_group(2)
    ra = h.join(a)
    h.coord.stop()
    assert ra.j.error == E.NOT_COORDINATOR
    assert h.sched.pending() == 0


def test_an_empty_group_refused_by_the_store_logs_a_warning_not_a_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Cluster mode refuses group-metadata writes while the ISR is below min.insync.replicas: expected, and
    repeated at every rebalance in that state, so one WARNING line each, never a traceback."""
    h = Harness()
    (a,) = h.stable_group(1)
    h.store.fail_with = KafkaError(E.NOT_ENOUGH_REPLICAS, "ISR below min.insync.replicas")
    with caplog.at_level(logging.WARNING):
        assert h.coord.leave_group("g", [(a, None)]) == (E.NONE, [E.NONE])
    refused = [r for r in caplog.records if "persisting group metadata failed" in r.getMessage()]
    assert [(r.levelno, r.exc_info) for r in refused] == [(logging.WARNING, None)], caplog.text
