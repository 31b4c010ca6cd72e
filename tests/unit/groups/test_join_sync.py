import logging

import pytest

from kafkad.coordinator.group import GroupConfig, GroupState
from kafkad.protocol.errors import ErrorCode as E
from kafkad.protocol.errors import KafkaError
from tests.unit.groups.harness import Harness


def test_initial_delay_collects_members_into_one_generation() -> None:
    h = Harness()
    a, b = h.join(), h.join()
    h.sched.advance(3000)
    assert a.join == [] and b.join == []  # b arrived during the delay: wait once more
    h.sched.advance(3000)
    assert a.j.generation_id == b.j.generation_id == 1
    assert a.j.leader == a.j.member_id
    assert {m.member_id for m in a.j.members} == {a.j.member_id, b.j.member_id}
    assert b.j.members == ()  # only the leader gets the member list
    assert a.j.protocol_name == "range"
    assert h.coord.groups["g"].state is GroupState.COMPLETING_REBALANCE


def test_initial_delay_extends_while_members_keep_arriving() -> None:
    h = Harness(GroupConfig(group_initial_rebalance_delay_ms=3000))
    a = h.join(rebalance=10_000)
    h.sched.advance(2000)
    h.join(rebalance=10_000)
    h.sched.advance(1000)  # first delay ends, a new member arrived: wait again
    assert a.join == []
    h.sched.advance(6000)
    assert a.j.error == E.NONE and len(a.j.members) == 2


def test_sync_distributes_leader_assignment_and_followers_wait() -> None:
    h = Harness()
    a, b = h.join(), h.join()
    h.sched.advance(6000)
    gen = a.j.generation_id
    fb = h.sync(b.j.member_id, gen)
    assert fb.sync == []  # parked until the leader syncs
    la = h.sync(a.j.member_id, gen, {a.j.member_id: b"A", b.j.member_id: b"B"})
    assert la.s.assignment == b"A" and fb.s.assignment == b"B"
    assert h.coord.groups["g"].state is GroupState.STABLE
    # a Stable group answers sync at once, with the stored assignment
    assert h.sync(b.j.member_id, gen).s.assignment == b"B"
    # the assignment was persisted before the answer
    assert len(h.store.records) == 1


def test_member_id_required_round_trip_v4() -> None:
    h = Harness()
    first = h.join(v4=True)
    assert first.j.error == E.MEMBER_ID_REQUIRED and first.j.member_id.startswith("client-")
    second = h.join(first.j.member_id, v4=True)
    h.sched.advance(6000)
    assert second.j.error == E.NONE and second.j.member_id == first.j.member_id


def test_pending_member_expires_after_session_timeout() -> None:
    h = Harness()
    first = h.join(v4=True)
    h.sched.advance(10_000)
    assert h.join(first.j.member_id, v4=True).j.error == E.UNKNOWN_MEMBER_ID


def test_protocol_selected_by_votes_among_common_protocols() -> None:
    h = Harness()
    a = h.join(protocols=(("range", b""), ("roundrobin", b""), ("sticky", b"")))
    h.join(protocols=(("roundrobin", b""), ("range", b"")))
    h.join(protocols=(("roundrobin", b""), ("sticky", b"")))
    h.sched.advance(6000)
    assert a.j.protocol_name == "roundrobin"


def test_inconsistent_protocol_and_type_rejected() -> None:
    h = Harness()
    h.stable_group(1)
    assert h.join(protocols=(("other", b""),)).j.error == E.INCONSISTENT_GROUP_PROTOCOL
    assert h.join(protocol_type="connect").j.error == E.INCONSISTENT_GROUP_PROTOCOL


def test_session_timeout_bounds_and_group_max_size() -> None:
    h = Harness(GroupConfig(group_max_size=2))
    assert h.join(session=5999).j.error == E.INVALID_SESSION_TIMEOUT
    assert h.join(session=1_800_001).j.error == E.INVALID_SESSION_TIMEOUT
    assert h.join(group="").j.error == E.INVALID_GROUP_ID
    h.join(), h.join()
    assert h.join().j.error == E.GROUP_MAX_SIZE_REACHED


def test_unknown_member_on_missing_group_and_sync_errors() -> None:
    h = Harness()
    assert h.join("nobody").j.error == E.UNKNOWN_MEMBER_ID
    ids = h.stable_group(2)
    assert h.sync(ids[0], 7).s.error == E.ILLEGAL_GENERATION
    assert h.sync("ghost", 1).s.error == E.UNKNOWN_MEMBER_ID
    assert h.sync("x", 1, group="nope").s.error == E.UNKNOWN_MEMBER_ID


def test_new_member_triggers_rebalance_and_sync_waiters_get_rebalance_in_progress() -> None:
    h = Harness()
    a, b = h.join(), h.join()
    h.sched.advance(6000)
    fb = h.sync(b.j.member_id, 1)
    c = h.join()  # joins during CompletingRebalance
    assert fb.s.error == E.REBALANCE_IN_PROGRESS
    assert h.coord.groups["g"].state is GroupState.PREPARING_REBALANCE
    ra, rb = h.join(a.j.member_id), h.join(b.j.member_id)
    assert ra.j.generation_id == rb.j.generation_id == c.j.generation_id == 2


def test_member_that_does_not_rejoin_is_dropped_at_rebalance_timeout() -> None:
    h = Harness()
    a, b = h.stable_group(2)
    ra = h.join(a)  # the leader rejoins: rebalance
    assert ra.join == []
    h.sched.advance(30_000)
    assert ra.j.generation_id == 2 and [m.member_id for m in ra.j.members] == [a]
    assert b not in h.coord.groups["g"].members


def test_sync_whose_offsets_partition_moved_answers_not_coordinator(caplog: pytest.LogCaptureFixture) -> None:
    """The __consumer_offsets partition lost its leadership under a SyncGroup (a power loss elsewhere moved
    it): Kafka's storeGroup answers NOT_COORDINATOR; it is no error of this broker (no ERROR line)."""
    h = Harness()
    a, b = h.join(), h.join()
    h.sched.advance(6000)
    gen = a.j.generation_id
    fb = h.sync(b.j.member_id, gen)
    h.store.fail_with = KafkaError(E.NOT_LEADER_OR_FOLLOWER, "__consumer_offsets-7: not the leader")
    with caplog.at_level(logging.INFO):
        la = h.sync(a.j.member_id, gen, {a.j.member_id: b"A", b.j.member_id: b"B"})
    assert la.s.error == fb.s.error == E.NOT_COORDINATOR
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
