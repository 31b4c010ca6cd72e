"""LogGroupStore against an in-memory partition: records land in the group's partition and replay."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kafkad.clock import ManualClock
from kafkad.daemon.groups import OFFSETS_TOPIC, GroupConfig, ManualScheduler, OffsetCommit
from kafkad.daemon.groups.group_coordinator import GroupCoordinator
from kafkad.daemon.groups.log_store import LogGroupStore
from kafkad.daemon.groups.records import partition_for
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

    def has_topic(self, topic: str) -> bool:
        return any(t == topic for t, _ in self.parts)

    def create_topic(
        self, topic: str, num_partitions: int, overrides: Mapping[str, str] | None = None
    ) -> None:
        self.overrides = overrides
        for i in range(num_partitions):
            self.parts[(topic, i)] = _Partition()

    def get(self, topic: str, partition: int) -> _Partition | None:
        return self.parts.get((topic, partition))


def test_commits_land_in_the_group_partition_and_replay() -> None:
    clock = ManualClock()
    replicas = _Replicas()
    store = LogGroupStore(replicas, clock, 5, 1 << 20)
    store.ensure_topic()
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
