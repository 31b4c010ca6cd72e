"""Transactional offset commits on the group coordinator (TxnOffsetCommit, issue 20 item 4): pending until
the producer's marker lands in the group's __consumer_offsets partition, committed or dropped by it, never
over a newer commit; OffsetFetch's require_stable sees them as unstable meanwhile; a reload of the log
replays the same rules and brings open transactions back pending. With LogGroupStore, the commit is a
transactional batch of the producer continuing its sequence, and replay yields its records and markers."""

from __future__ import annotations

import asyncio

from kafkad.clock import ManualClock
from kafkad.coordinator.group import OFFSETS_TOPIC, GroupConfig, ManualScheduler, OffsetCommit
from kafkad.coordinator.group.group_coordinator import GroupCoordinator
from kafkad.coordinator.group.log_store import LogGroupStore, replay_partition
from kafkad.coordinator.group.records import partition_for
from kafkad.coordinator.group.store import Producer, TxnEnd, TxnRecord
from kafkad.protocol.errors import ErrorCode as E
from kafkad.protocol.errors import KafkaError
from kafkad.storage.records import ControlRecordType, read_header
from kafkad.storage.records.builder import build_control_batch
from tests.unit.groups.harness import Harness
from tests.unit.groups.test_log_store import _Replicas

P1 = Producer(1000, 3)
P2 = Producer(2000, 0)
TP = ("in", 0)


def _home(h: Harness, group: str = "s") -> int:
    return partition_for(group, h.coord.offsets_partition_count)


def _offset(h: Harness, group: str = "s", tp: tuple[str, int] = TP) -> int | None:
    v = h.coord.fetch_offsets(group, [tp])[1][tp]
    return None if v is None else v.offset


def _txn_commit(h: Harness, offset: int, producer: Producer = P1, group: str = "s", **kw: object) -> E:
    res = h.coord.commit_txn_offsets(
        group,
        producer,
        int(kw.get("generation", -1)),  # type: ignore[call-overload]
        str(kw.get("member", "")),
        None,
        {TP: OffsetCommit(offset)},
    )
    return res[TP]


def test_pending_until_the_commit_marker() -> None:
    h = Harness()
    h.coord.commit_offsets("s", -1, "", None, {TP: OffsetCommit(5)})
    assert _txn_commit(h, 10) is E.NONE
    assert _offset(h) == 5  # not visible before the marker
    assert h.coord.unstable_partitions("s") == {TP}
    h.coord.on_txn_marker(_home(h) + 1, P1.producer_id, True)  # another partition's marker: not ours
    h.coord.on_txn_marker(_home(h), P2.producer_id, True)  # another producer's
    assert _offset(h) == 5 and h.coord.unstable_partitions("s") == {TP}
    h.coord.on_txn_marker(_home(h), P1.producer_id, True)
    assert _offset(h) == 10 and h.coord.unstable_partitions("s") == set()
    assert h.coord._txn_groups == {}  # nothing left to tell


def test_abort_marker_drops_the_pending_offsets() -> None:
    h = Harness()
    h.coord.commit_offsets("s", -1, "", None, {TP: OffsetCommit(5)})
    assert _txn_commit(h, 10) is E.NONE
    h.coord.on_txn_marker(_home(h), P1.producer_id, False)
    assert _offset(h) == 5 and h.coord.unstable_partitions("s") == set()
    h.coord.on_txn_marker(_home(h), P1.producer_id, True)  # a resent marker finds nothing pending
    assert _offset(h) == 5


def test_marker_never_puts_an_older_commit_over_a_newer_one() -> None:
    h = Harness()
    assert _txn_commit(h, 10) is E.NONE
    h.coord.commit_offsets("s", -1, "", None, {TP: OffsetCommit(20)})  # appended after the txn commit
    h.coord.on_txn_marker(_home(h), P1.producer_id, True)
    assert _offset(h) == 20


def test_two_producers_of_one_group_complete_independently() -> None:
    h = Harness()
    other = ("in", 1)
    h.coord.commit_txn_offsets("s", P1, -1, "", None, {TP: OffsetCommit(7)})
    h.coord.commit_txn_offsets("s", P2, -1, "", None, {other: OffsetCommit(8)})
    h.coord.on_txn_marker(_home(h), P2.producer_id, True)
    assert h.coord.unstable_partitions("s") == {TP}
    assert _offset(h, tp=other) == 8 and _offset(h) is None
    h.coord.on_txn_marker(_home(h), P1.producer_id, False)
    assert h.coord.unstable_partitions("s") == set() and _offset(h) is None


def test_member_checks_of_a_transactional_commit() -> None:
    """Kafka's validateOffsetCommit(isTransactional): generation and member are checked when given; a
    producer that sends neither (TxnOffsetCommit v0-2) may commit to a live group."""
    h = Harness()
    a, _ = h.stable_group(2)
    assert _txn_commit(h, 1, group="g", generation=1, member=a) is E.NONE
    assert _txn_commit(h, 1, group="g", generation=0, member=a) is E.ILLEGAL_GENERATION
    assert _txn_commit(h, 1, group="g", generation=1, member="x") is E.UNKNOWN_MEMBER_ID
    assert _txn_commit(h, 1, group="g") is E.NONE  # no member, no generation
    assert h.coord.commit_offsets("g", -1, "", None, {TP: OffsetCommit(1)}) == {TP: E.UNKNOWN_MEMBER_ID}
    assert h.coord.commit_txn_offsets("", P1, -1, "", None, {TP: OffsetCommit(1)}) == {TP: E.INVALID_GROUP_ID}


def test_append_errors_and_nothing_pending_after_them() -> None:
    h = Harness()
    for raised, answered in (
        (KafkaError(E.INVALID_PRODUCER_EPOCH, "fenced"), E.INVALID_PRODUCER_EPOCH),
        (KafkaError(E.NOT_LEADER_OR_FOLLOWER, "moved"), E.NOT_COORDINATOR),
        (KafkaError(E.NOT_ENOUGH_REPLICAS, "isr"), E.COORDINATOR_NOT_AVAILABLE),
        (OSError("disk"), E.COORDINATOR_NOT_AVAILABLE),
    ):
        h.store.fail_with = raised
        assert _txn_commit(h, 10) is answered
    assert h.coord.unstable_partitions("s") == set()
    h.store.fail_with = None
    res = h.coord.commit_txn_offsets("s", P1, -1, "", None, {TP: OffsetCommit(1, metadata="x" * 5000)})
    assert res == {TP: E.OFFSET_METADATA_TOO_LARGE}


def test_failed_replication_is_not_pending() -> None:
    h = Harness()
    assert _txn_commit(h, 10) is E.NONE
    h.coord.fail_txn_commit("s", P1.producer_id, [TP])
    assert h.coord.unstable_partitions("s") == set() and h.coord._txn_groups == {}
    h.coord.on_txn_marker(_home(h), P1.producer_id, True)
    assert _offset(h) is None


def test_expiry_keeps_a_group_with_pending_transactional_offsets() -> None:
    cfg = GroupConfig(offsets_retention_ms=1000, offsets_retention_check_interval_ms=100)
    h = Harness(cfg)
    assert _txn_commit(h, 10) is E.NONE
    h.clock.advance(5000)
    h.coord.expire_offsets()
    assert "s" in h.coord.groups
    h.coord.on_txn_marker(_home(h), P1.producer_id, True)
    assert _offset(h) == 10


def test_reload_replays_markers_and_keeps_open_transactions_pending() -> None:
    h = Harness()
    other = ("in", 1)
    h.coord.commit_offsets("s", -1, "", None, {TP: OffsetCommit(1), other: OffsetCommit(1)})
    _txn_commit(h, 10)  # committed
    h.store.end_txn(P1.producer_id, True)
    h.coord.commit_txn_offsets("s", P2, -1, "", None, {other: OffsetCommit(30)})  # aborted
    h.store.end_txn(P2.producer_id, False)
    _txn_commit(h, 40, group="t")  # txn commit, then a newer plain commit, then the COMMIT marker
    h.coord.commit_offsets("t", -1, "", None, {TP: OffsetCommit(50)})
    h.store.end_txn(P1.producer_id, True)
    h.coord.commit_txn_offsets("u", P2, -1, "", None, {TP: OffsetCommit(60)})  # still open at the end
    assert any(isinstance(r, TxnRecord) for r in h.store.records)
    assert h.store.records.count(TxnEnd(P1.producer_id, True)) == 2

    fresh = Harness(store=h.store)
    fresh.coord.load(h.store.records)
    assert (_offset(fresh), _offset(fresh, tp=other)) == (10, 1)
    assert _offset(fresh, "t") == 50
    assert fresh.coord.unstable_partitions("u") == {TP} and _offset(fresh, "u") is None
    fresh.coord.on_txn_marker(_home(fresh, "u"), P2.producer_id, True)  # the coordinator resends it
    assert _offset(fresh, "u") == 60 and fresh.coord.unstable_partitions("u") == set()


def test_a_newer_plain_commit_survives_the_marker_of_a_reloaded_open_transaction() -> None:
    h = Harness()
    _txn_commit(h, 40)
    h.coord.commit_offsets("s", -1, "", None, {TP: OffsetCommit(50)})
    fresh = Harness(store=h.store)
    fresh.coord.load(h.store.records)
    fresh.coord.on_txn_marker(_home(fresh), P1.producer_id, True)
    assert _offset(fresh) == 50


# --- LogGroupStore: the transactional batch and its replay ---------------------------------------------


def test_log_store_writes_a_transactional_batch_and_replays_markers() -> None:
    clock = ManualClock()
    replicas = _Replicas()
    store = LogGroupStore(replicas, clock, 5, 1 << 20)
    asyncio.run(store.ensure_topic())
    coord = GroupCoordinator(GroupConfig(), clock, ManualScheduler(clock), store)
    coord.offsets_partition_count = store.num_partitions
    home = replicas.parts[(OFFSETS_TOPIC, partition_for("s", 5))]
    assert coord.commit_txn_offsets("s", P1, -1, "", None, {TP: OffsetCommit(10)}) == {TP: E.NONE}
    header = read_header(home.log.batches[-1][1])
    assert header.is_transactional and not header.is_control
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (1000, 3, 0)
    marker = build_control_batch(
        ControlRecordType.COMMIT, producer_id=1000, producer_epoch=3, coordinator_epoch=0, timestamp=0
    )
    home.append_as_leader(memoryview(bytearray(marker)), now_ms=0, required_acks=1)
    coord.on_txn_marker(partition_for("s", 5), P1.producer_id, True)
    assert coord.fetch_offsets("s", [TP])[1][TP] is not None

    replayed = list(replay_partition(home))
    assert [type(r) for r in replayed] == [TxnRecord, TxnEnd]
    assert replayed[1] == TxnEnd(1000, True)
    assert [type(r) for r in replay_partition(home, start=1)] == [TxnEnd]  # the tail after a replay
    assert list(replay_partition(home, end=1)) == replayed[:1]
    fresh = GroupCoordinator(GroupConfig(), clock, ManualScheduler(clock), store)
    fresh.load(store.replay())
    v = fresh.fetch_offsets("s", [TP])[1][TP]
    assert v is not None and v.offset == 10 and fresh.unstable_partitions("s") == set()


def test_log_store_continues_the_producer_sequence() -> None:
    """A second commit of the same producer epoch must not repeat sequence 0: a log checking sequences
    would take it for a retried duplicate and drop it."""

    class _Entry:
        epoch = 3
        batches = [type("B", (), {"last_seq": 4})()]

    clock = ManualClock()
    replicas = _Replicas()
    store = LogGroupStore(replicas, clock, 5, 1 << 20)
    asyncio.run(store.ensure_topic())
    home = replicas.parts[(OFFSETS_TOPIC, partition_for("s", 5))]
    home.log.producer_state = type("S", (), {"producers": {1000: _Entry()}})()  # type: ignore[attr-defined]
    store.write("s", [(b"k", b"v")], producer=P1)
    assert read_header(home.log.batches[-1][1]).base_sequence == 5
    store.write("s", [(b"k", b"v")], producer=Producer(1000, 4))  # a new epoch starts at 0
    assert read_header(home.log.batches[-1][1]).base_sequence == 0


def test_offset_delete_drops_pending_transactional_offsets() -> None:
    """Kafka's removeOffsets: OffsetDelete removes the partition's pending transactional offsets too, so
    the producer's later COMMIT marker does not bring back an offset the admin deleted."""
    h = Harness()
    h.coord.commit_offsets("s", -1, "", None, {TP: OffsetCommit(5)})
    assert _txn_commit(h, 10) is E.NONE
    assert h.coord.delete_offsets("s", [TP]) == (E.NONE, {TP: E.NONE})
    assert h.coord.unstable_partitions("s") == set()
    h.coord.on_txn_marker(_home(h), P1.producer_id, True)
    assert _offset(h) is None


def test_a_reload_retires_the_replaced_group_and_its_session_timers() -> None:
    """A leader reloads its __consumer_offsets partition (a new leader epoch, issue 20's chaos run): the
    group it replaces must stop. Its members' session timers kept running on the old object, "expired"
    members that were heartbeating the new one, and rebalanced a group nobody served, appending its
    records to the partition."""
    h = Harness()
    ids = h.stable_group(2)
    gen = h.coord.groups["g"].generation_id
    h.coord.load(list(h.store.records))  # the same partition, loaded again
    written = len(h.store.records)
    for _ in range(80):  # 40 s of heartbeats every 0.5 s: past the 10 s sessions and 30 s rebalances
        h.sched.advance(500)
        assert [h.coord.heartbeat("g", gen, m, None) for m in ids] == [E.NONE, E.NONE]
    group = h.coord.groups["g"]
    assert group.generation_id == gen and sorted(group.members) == sorted(ids)
    assert len(h.store.records) == written  # nothing appended by a retired group
