from kafkad.coordinator.group import GroupConfig, GroupCoordinator, GroupState, OffsetCommit
from kafkad.protocol.errors import ErrorCode as E
from kafkad.protocol.errors import KafkaError
from tests.unit.groups.harness import Harness


def test_simple_commit_creates_empty_group_and_fetch_returns_it() -> None:
    h = Harness()
    res = h.coord.commit_offsets("s", -1, "", None, {("t", 0): OffsetCommit(42, 3, "meta")})
    assert res == {("t", 0): E.NONE}
    err, got = h.coord.fetch_offsets("s", [("t", 0), ("t", 1)])
    assert err == E.NONE
    v = got[("t", 0)]
    assert v is not None and (v.offset, v.leader_epoch, v.metadata) == (42, 3, "meta")
    assert got[("t", 1)] is None
    assert set(h.coord.fetch_offsets("s", None)[1]) == {("t", 0)}
    assert h.coord.groups["s"].state is GroupState.EMPTY


def test_commit_checks_generation_and_member() -> None:
    h = Harness()
    a, _ = h.stable_group(2)
    tp = {("t", 0): OffsetCommit(5)}
    assert h.coord.commit_offsets("g", 1, a, None, tp) == {("t", 0): E.NONE}
    assert h.coord.commit_offsets("g", 0, a, None, tp) == {("t", 0): E.ILLEGAL_GENERATION}
    assert h.coord.commit_offsets("g", 1, "x", None, tp) == {("t", 0): E.UNKNOWN_MEMBER_ID}
    assert h.coord.commit_offsets("g", -1, "", None, tp) == {("t", 0): E.UNKNOWN_MEMBER_ID}
    assert h.coord.commit_offsets("nope", 3, "m", None, tp) == {("t", 0): E.ILLEGAL_GENERATION}
    h.join()  # rebalance: commits of the current generation still go through
    assert h.coord.commit_offsets("g", 1, a, None, tp) == {("t", 0): E.NONE}


def test_commit_during_completing_rebalance_is_refused() -> None:
    h = Harness()
    a = h.join()
    h.sched.advance(3000)
    res = h.coord.commit_offsets("g", 1, a.j.member_id, None, {("t", 0): OffsetCommit(1)})
    assert res == {("t", 0): E.REBALANCE_IN_PROGRESS}


def test_metadata_too_large_unknown_partition_and_store_failure() -> None:
    h = Harness(GroupConfig(offset_metadata_max_bytes=4))
    h.coord.partition_exists = lambda t, p: t == "t"
    res = h.coord.commit_offsets(
        "s",
        -1,
        "",
        None,
        {("t", 0): OffsetCommit(1, metadata="12345"), ("u", 0): OffsetCommit(1), ("t", 1): OffsetCommit(2)},
    )
    assert res == {
        ("t", 0): E.OFFSET_METADATA_TOO_LARGE,
        ("u", 0): E.UNKNOWN_TOPIC_OR_PARTITION,
        ("t", 1): E.NONE,
    }
    h.store.fail_with = KafkaError(E.KAFKA_STORAGE_ERROR, "disk gone")
    res = h.coord.commit_offsets("s", -1, "", None, {("t", 1): OffsetCommit(9)})
    assert res == {("t", 1): E.NOT_COORDINATOR}
    got = h.coord.fetch_offsets("s", [("t", 1)])[1][("t", 1)]
    assert got is not None and got.offset == 2  # the failed commit changed nothing


def test_state_survives_reload_from_store() -> None:
    h = Harness()
    a, b = h.stable_group(2)
    h.coord.commit_offsets("g", 1, a, None, {("t", 0): OffsetCommit(7), ("t", 1): OffsetCommit(8)})
    h.coord.commit_offsets("g", 1, a, None, {("t", 0): OffsetCommit(9)})
    h.coord.commit_offsets("s", -1, "", None, {("x", 0): OffsetCommit(1)})
    assert h.coord.delete_groups(["s"]) == {"s": E.NONE}
    fresh = Harness(store=h.store)
    fresh.coord.load(h.store.records)
    g = fresh.coord.groups["g"]
    assert g.state is GroupState.STABLE and g.generation_id == 1 and g.leader_id == a
    assert {m: x.assignment for m, x in g.members.items()} == {a: b"a0", b: b"a1"}
    offs = fresh.coord.fetch_offsets("g", None)[1]
    assert {tp: v.offset for tp, v in offs.items() if v} == {("t", 0): 9, ("t", 1): 8}
    assert "s" not in fresh.coord.groups
    # members loaded back keep working, and expire if they never come back
    assert fresh.coord.heartbeat("g", 1, a, None) == E.NONE
    fresh.sched.advance(10_000)
    assert fresh.coord.groups["g"].state is GroupState.EMPTY


def test_delete_groups_errors() -> None:
    h = Harness()
    h.stable_group(1)
    h.coord.commit_offsets("s", -1, "", None, {("t", 0): OffsetCommit(1)})
    assert h.coord.delete_groups(["g", "zz", "s"]) == {
        "g": E.NON_EMPTY_GROUP,
        "zz": E.GROUP_ID_NOT_FOUND,
        "s": E.NONE,
    }
    assert h.coord.fetch_offsets("s", None)[1] == {}
    assert h.store.records[-1][1] is None  # group tombstone written


def test_list_and_describe() -> None:
    h = Harness()
    a, b = h.stable_group(2)
    listing = h.coord.list_groups()
    assert [(x.group_id, x.protocol_type, x.state) for x in listing] == [("g", "consumer", GroupState.STABLE)]
    err, summary = h.coord.describe_group("g")
    assert err == E.NONE and summary.protocol_data == "range"
    assert [(m.member_id, m.assignment) for m in summary.members] == [(a, b"a0"), (b, b"a1")]
    assert h.coord.describe_group("missing")[1].state is GroupState.DEAD


def test_offset_expiry_for_empty_groups() -> None:
    cfg = GroupConfig(offsets_retention_ms=60_000, offsets_retention_check_interval_ms=10_000)
    h = Harness(cfg)
    (a,) = h.stable_group(1)
    h.coord.commit_offsets("g", 1, a, None, {("t", 0): OffsetCommit(1)})
    h.coord.commit_offsets("s", -1, "", None, {("t", 0): OffsetCommit(1)})
    h.coord.leave_group("g", [(a, None)])  # "g" is Empty from now on
    h.coord.start_expiry()
    h.sched.advance(30_000)
    h.coord.commit_offsets("s", -1, "", None, {("t", 1): OffsetCommit(1)})
    h.sched.advance(20_000)
    assert "g" in h.coord.groups and len(h.coord.groups["s"].offsets) == 2
    h.sched.advance(10_000)
    assert "g" not in h.coord.groups  # empty for 60 s: offsets and group gone
    # "s" (simple): each offset expires on its own commit time
    assert set(h.coord.groups["s"].offsets) == {("t", 1)}
    h.sched.advance(30_000)
    assert "s" not in h.coord.groups
    h.coord.stop()
    assert h.sched.pending() == 0


def test_coordinator_type_is_exported() -> None:
    assert GroupCoordinator.commit_offsets is not None
