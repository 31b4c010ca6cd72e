from kafkad.coordinator.group import GroupState
from kafkad.protocol.errors import ErrorCode as E
from tests.unit.groups.harness import Harness


def _static_group(h: Harness) -> tuple[str, str]:
    a, b = h.join(instance="i-a"), h.join(instance="i-b")
    h.sched.advance(6000)
    gen = a.j.generation_id
    fb = h.sync(b.j.member_id, gen, instance="i-b")
    h.sync(a.j.member_id, gen, {a.j.member_id: b"A", b.j.member_id: b"B"}, instance="i-a")
    assert fb.s.assignment == b"B"
    return a.j.member_id, b.j.member_id


def test_static_member_rejoin_gets_old_assignment_without_rebalance() -> None:
    h = Harness()
    a, b = _static_group(h)
    assert b.startswith("i-b-")
    back = h.join(instance="i-b")  # restarted process: no member id
    new_b = back.j.member_id
    assert back.j.error == E.NONE and new_b != b
    assert back.j.generation_id == 1 and back.j.leader == a
    group = h.coord.groups["g"]
    assert group.state is GroupState.STABLE and group.generation_id == 1
    assert h.sync(new_b, 1, instance="i-b").s.assignment == b"B"
    # the old incarnation is fenced
    assert h.coord.heartbeat("g", 1, b, "i-b") == E.FENCED_INSTANCE_ID
    assert h.coord.heartbeat("g", 1, new_b, "i-b") == E.NONE


def test_silent_static_member_removed_at_session_expiry() -> None:
    h = Harness()
    a, b = _static_group(h)
    ra = h.join(a, instance="i-a")
    h.sched.advance(10_000)  # b's session expires while a waits: b leaves, join completes
    assert ra.j.generation_id == 2 and b not in h.coord.groups["g"].members


def test_static_member_survives_rebalance_timeout_until_session_expiry() -> None:
    h = Harness()
    a, b = _static_group(h)
    h.coord.heartbeat("g", 1, b, "i-b")
    ra = h.join(a, instance="i-a")
    h.sched.advance(9_000)
    h.coord.heartbeat("g", 1, b, "i-b")
    # rebalance timeout is 30 s, sessions 10 s: b is kept (static) until its session ends
    h.sched.advance(9_000)
    h.coord.heartbeat("g", 1, b, "i-b")
    assert ra.join == []
    h.sched.advance(10_000)
    assert ra.j.generation_id == 2 and [m.member_id for m in ra.j.members] == [a]


def test_unknown_instance_id_heartbeat() -> None:
    h = Harness()
    a, _ = _static_group(h)
    assert h.coord.heartbeat("g", 1, a, "i-zzz") == E.UNKNOWN_MEMBER_ID
