"""LogGroupStore against in-memory partitions: records land in the group's partition and replay; the
topic is created on demand, once, one partition at a time, and a torn creation is completed."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from kafkad.clock import ManualClock
from kafkad.coordinator.group import OFFSETS_TOPIC, GroupConfig, ManualScheduler, OffsetCommit
from kafkad.coordinator.group.group_coordinator import GroupCoordinator
from kafkad.coordinator.group.log_store import LogGroupStore
from kafkad.coordinator.group.records import partition_for
from kafkad.protocol.errors import ErrorCode, KafkaError
from kafkad.storage.records import patch_offset_and_epoch, read_header


@dataclass
class _Slice:
    data: bytes

    def read(self) -> bytes:
        return self.data


@dataclass
class _Read:
    slices: list[_Slice]
    size: int


@dataclass
class _Log:
    batches: list[tuple[int, bytes]] = field(default_factory=list)  # (base offset, bytes)
    end: int = 0

    def read(self, offset: int, max_bytes: int, **_: Any) -> _Read:
        chosen = [b for base, b in self.batches if read_header(b).last_offset >= offset]
        data = b"".join(chosen)[:max_bytes] if chosen else b""
        return _Read([_Slice(data)] if data else [], len(data))


@dataclass
class _Partition:
    log: _Log = field(default_factory=_Log)
    log_start_offset: int = 0
    is_leader: bool = True

    @property
    def log_end_offset(self) -> int:
        return self.log.end

    def append_as_leader(self, records: memoryview, *, now_ms: int, required_acks: int) -> None:
        buf = bytearray(records)
        header = read_header(buf)
        patch_offset_and_epoch(buf, 0, self.log.end, 0)
        self.log.batches.append((self.log.end, bytes(buf)))
        self.log.end += header.last_offset_delta + 1


class _Replicas:
    def __init__(self) -> None:
        self.parts: dict[tuple[str, int], _Partition] = {}
        self.overrides: Mapping[str, str] | None = None
        self.creates = 0
        self.added: list[int] = []  # new_total of each add_partitions call
        self.offline: set[tuple[str, int]] = set()  # partitions whose files failed

    def has_topic(self, topic: str) -> bool:
        return any(t == topic for t, _ in self.parts)

    def create_topic(
        self, topic: str, num_partitions: int, overrides: Mapping[str, str] | None = None
    ) -> None:
        assert not self.has_topic(topic), "created twice"
        self.creates += 1
        self.overrides = overrides
        for i in range(num_partitions):
            self.parts[(topic, i)] = _Partition()

    def add_partitions(self, topic: str, new_total: int) -> None:
        self.added.append(new_total)
        for i in range(new_total):
            self.parts.setdefault((topic, i), _Partition())

    def get(self, topic: str, partition: int) -> _Partition | None:
        return self.parts.get((topic, partition))

    def is_offline(self, topic: str, partition: int) -> bool:
        return (topic, partition) in self.offline

    def count(self) -> int:
        return sum(1 for t, _ in self.parts if t == OFFSETS_TOPIC)


def test_commits_land_in_the_group_partition_and_replay() -> None:
    clock = ManualClock()
    replicas = _Replicas()
    store = LogGroupStore(replicas, clock, 5, 1 << 20)
    asyncio.run(store.ensure_topic())
    assert replicas.overrides is not None and replicas.overrides["cleanup.policy"] == "compact"
    coord = GroupCoordinator(GroupConfig(), clock, ManualScheduler(clock), store)
    for i in range(3):
        coord.commit_offsets("grp", -1, "", None, {("t", 0): OffsetCommit(i), ("t", 1): OffsetCommit(9)})
    coord.commit_offsets("other", -1, "", None, {("u", 0): OffsetCommit(4)})
    coord.delete_groups(["other"])
    home = replicas.parts[(OFFSETS_TOPIC, partition_for("grp", 5))]
    assert home.log_end_offset == 6  # 3 commits of 2 partitions
    fresh = GroupCoordinator(GroupConfig(), clock, ManualScheduler(clock), store)
    fresh.load(store.replay())
    offs = fresh.fetch_offsets("grp", None)[1]
    assert {tp: v.offset for tp, v in offs.items() if v} == {("t", 0): 2, ("t", 1): 9}
    assert "other" not in fresh.groups


def test_topic_is_created_once_for_concurrent_callers_one_partition_per_loop_step() -> None:
    replicas = _Replicas()
    store = LogGroupStore(replicas, ManualClock(), 6, 1 << 20)
    assert not store.ready and replicas.count() == 0  # opening the store creates nothing
    seen: list[tuple[int, bool]] = []  # (partitions, ready) as other tasks see them meanwhile

    async def watcher() -> None:
        while not store.ready:
            seen.append((replicas.count(), store.ready))
            await asyncio.sleep(0)

    async def main() -> None:
        watch = asyncio.create_task(watcher())
        await asyncio.gather(store.ensure_topic(), store.ensure_topic(), store.ensure_topic())
        await watch

    asyncio.run(main())
    assert replicas.creates == 1 and replicas.count() == 6 and store.ready
    assert replicas.overrides == {"cleanup.policy": "compact", "segment.bytes": str(1 << 20)}
    assert replicas.added == [2, 3, 4, 5, 6]  # one partition per step, never twice
    assert (1, False) in seen and (5, False) in seen  # the loop ran between partitions, not ready yet
    asyncio.run(store.ensure_topic())  # ready: nothing more to do
    assert replicas.creates == 1 and replicas.added == [2, 3, 4, 5, 6]


def test_a_failed_creation_is_retried_by_the_next_caller() -> None:
    from kafkad.protocol.errors import ErrorCode, KafkaError

    class _Full(_Replicas):
        fail = True

        def add_partitions(self, topic: str, new_total: int) -> None:
            if self.fail:
                raise OSError("No space left on device")
            super().add_partitions(topic, new_total)

    replicas = _Full()
    store = LogGroupStore(replicas, ManualClock(), 3, 1 << 20)
    try:
        asyncio.run(store.ensure_topic())
        raise AssertionError("expected COORDINATOR_NOT_AVAILABLE")
    except KafkaError as e:
        assert e.code == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert not store.ready and replicas.count() == 1
    replicas.fail = False
    asyncio.run(store.ensure_topic())
    assert store.ready and replicas.count() == 3 and replicas.creates == 1


def test_a_torn_creation_is_completed_and_a_topic_with_data_keeps_its_count() -> None:
    torn = _Replicas()
    torn.create_topic(OFFSETS_TOPIC, 2, {"cleanup.policy": "compact"})  # crash after 2 of 5, no data
    store = LogGroupStore(torn, ManualClock(), 5, 1 << 20)
    assert store.num_partitions == 5 and not store.ready
    asyncio.run(store.ensure_topic())
    assert store.ready and torn.count() == 5 and torn.creates == 1

    used = _Replicas()
    used.create_topic(OFFSETS_TOPIC, 3, {"cleanup.policy": "compact"})
    clock = ManualClock()
    LogGroupStore(used, clock, 3, 1 << 20).write("g", [(b"k", b"v")])  # written with 3 partitions
    store = LogGroupStore(used, clock, 5, 1 << 20)  # offsets.topic.num.partitions raised later
    assert store.num_partitions == 3 and store.ready  # the hash must keep finding the data


def test_every_batch_is_what_the_storage_builder_makes_of_the_records() -> None:
    # The one-record fast path patches a cached batch: it must match a batch built from scratch,
    # whether the value keeps its size (patched), changes it (rebuilt) or is a tombstone.
    from kafkad.coordinator.group.records import OffsetValue
    from kafkad.coordinator.group.store import offset_record
    from kafkad.storage.records.builder import SimpleRecord, build_batch

    clock = ManualClock()
    replicas = _Replicas()
    store = LogGroupStore(replicas, clock, 1, 1 << 20)
    asyncio.run(store.ensure_topic())
    part = replicas.parts[(OFFSETS_TOPIC, 0)]
    writes = [
        [offset_record("g", "t", 0, OffsetValue(1, -1, "", 10))],
        [offset_record("g", "t", 0, OffsetValue(2**40, 7, "", 11))],  # same size: patched
        [offset_record("g", "t", 0, OffsetValue(3, 7, "m" * 70, 12))],  # 2-byte length varint
        [offset_record("g", "t", 0, OffsetValue(4, 8, "n" * 70, 13))],  # patched, long value
        [offset_record("g", "t", 0, None)],  # tombstone
        [offset_record("g", "t", 0, OffsetValue(5, -1, "", 14)), offset_record("g", "u", 1, None)],
        [offset_record("g", "t", 0, OffsetValue(6, -1, "", 15))],  # the template survives the above
    ]
    for i, records in enumerate(writes):
        clock.advance(1000 + i)
        store.write("g", records)
        now = clock.time_ms()
        expected = bytearray(
            build_batch([SimpleRecord(k, v, timestamp=now) for k, v in records], base_offset=0)
        )
        base = part.log.batches[-1][0]
        patch_offset_and_epoch(expected, 0, base, 0)
        assert part.log.batches[-1][1] == bytes(expected), i
    fresh = GroupCoordinator(GroupConfig(), clock, ManualScheduler(clock), store)
    fresh.load(store.replay())
    value = fresh.fetch_offsets("g", [("t", 0)])[1][("t", 0)]
    assert value is not None and (value.offset, value.commit_timestamp) == (6, 15)


def test_only_small_values_get_a_cached_template() -> None:
    from kafkad.coordinator.group.records import OffsetValue
    from kafkad.coordinator.group.store import offset_record

    store = LogGroupStore(_Replicas(), ManualClock(), 1, 1 << 20)
    asyncio.run(store.ensure_topic())
    store.write("g", [offset_record("g", "t", 0, OffsetValue(1, -1, "", 10))])
    store.write("g", [offset_record("g", "t", 1, OffsetValue(1, -1, "x" * 1000, 10))])  # e.g. group metadata
    cached_sizes = [size for _batch, size in store._templates.values()]
    assert len(cached_sizes) == 1 and cached_sizes[0] < 256


def test_close_stops_a_creation_in_progress() -> None:
    replicas = _Replicas()
    store = LogGroupStore(replicas, ManualClock(), 50, 1 << 20)

    async def main() -> None:
        waiter = asyncio.ensure_future(store.ensure_topic())
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        store.close()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        for _ in range(5):
            await asyncio.sleep(0)

    asyncio.run(main())
    assert not store.ready and 1 <= replicas.count() < 50  # no partition added after close


def test_an_offline_offsets_partition_keeps_the_partition_count_and_fails_only_its_groups() -> None:
    """A __consumer_offsets partition whose files failed still counts: the group hash must not change
    (commits would land in the wrong partitions), nothing is created in its place, and only the groups
    it holds get COORDINATOR_NOT_AVAILABLE."""
    clock = ManualClock()
    replicas = _Replicas()
    for i in (0, 1, 3):
        replicas.parts[(OFFSETS_TOPIC, i)] = _Partition()
    replicas.parts[(OFFSETS_TOPIC, 0)].log.end = 5  # holds data
    replicas.offline.add((OFFSETS_TOPIC, 2))
    store = LogGroupStore(replicas, clock, 4, 1 << 20)
    assert store.num_partitions == 4 and store.ready
    asyncio.run(store.ensure_topic())
    assert replicas.creates == 0 and replicas.added == []
    on_offline = next(g for g in (f"g{i}" for i in range(100)) if partition_for(g, 4) == 2)
    elsewhere = next(g for g in (f"g{i}" for i in range(100)) if partition_for(g, 4) == 1)
    with pytest.raises(KafkaError) as err:
        store.write(on_offline, [(b"k", b"v")])
    assert err.value.code is ErrorCode.COORDINATOR_NOT_AVAILABLE
    store.write(elsewhere, [(b"k", b"v")])
    assert replicas.parts[(OFFSETS_TOPIC, 1)].log.end == 1
