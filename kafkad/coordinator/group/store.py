"""What the coordinator persists, as __consumer_offsets key/value pairs, and where it goes.

The coordinator calls `GroupStore.write(group_id, records)` synchronously before answering a
commit or completing a rebalance; a raised exception means "not persisted" and becomes an error
code for the client. `MemoryStore` keeps the pairs in a list (tests, and a broker without disks);
`log_store.LogGroupStore` appends them to the partition of the internal topic.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

from kafkad.coordinator.group.group import Group
from kafkad.coordinator.group.records import (
    GroupKey,
    GroupValue,
    MemberValue,
    OffsetKey,
    OffsetValue,
    decode_group_value,
    decode_key,
    decode_offset_value,
    encode_group_key,
    encode_group_value,
    encode_offset_value,
    offset_key_bytes,
)

KeyValue = tuple[bytes, bytes | None]


class GroupStore(Protocol):
    def write(self, group_id: str, records: Sequence[KeyValue], *, cleanup: bool = False) -> None:
        """Persist `records`; `cleanup`: tombstones of a group/offset deletion or expiry, which Kafka's
        cleanupGroupMetadata appends with acks=1 (everything else: offsets.commit.required.acks)."""


class MemoryStore:
    """Keeps every written pair in order; `records` replays them into a fresh coordinator."""

    def __init__(self) -> None:
        self.records: list[KeyValue] = []
        self.fail_with: Exception | None = None

    def write(self, group_id: str, records: Sequence[KeyValue], *, cleanup: bool = False) -> None:
        if self.fail_with is not None:
            raise self.fail_with
        self.records.extend(records)


# Offset keys repeat commit after commit (same group, same partitions): encode each once. Bounded by
# dropping everything when full, which only costs re-encoding.
_KEY_CACHE: dict[tuple[str, str, int], bytes] = {}
_KEY_CACHE_MAX = 65536


def offset_record(group_id: str, topic: str, partition: int, value: OffsetValue | None) -> KeyValue:
    tp = (group_id, topic, partition)
    key = _KEY_CACHE.get(tp)
    if key is None:
        if len(_KEY_CACHE) >= _KEY_CACHE_MAX:
            _KEY_CACHE.clear()
        key = _KEY_CACHE[tp] = offset_key_bytes(group_id, topic, partition)
    return key, None if value is None else encode_offset_value(value)


def group_record(group: Group, assignments: dict[str, bytes] | None = None) -> KeyValue:
    """The group's metadata as of now; `assignments` overrides members' current assignment."""
    members = tuple(
        MemberValue(
            m.member_id,
            m.group_instance_id,
            m.client_id,
            m.client_host,
            m.rebalance_timeout_ms,
            m.session_timeout_ms,
            m.metadata(group.protocol_name),
            (assignments or {}).get(m.member_id, m.assignment),
        )
        for m in group.members.values()
    )
    value = GroupValue(
        group.protocol_type or "",
        group.generation_id,
        group.protocol_name,
        group.leader_id,
        group.state_timestamp_ms,
        members,
    )
    return encode_group_key(GroupKey(group.group_id)), encode_group_value(value)


def group_tombstone(group_id: str) -> KeyValue:
    return encode_group_key(GroupKey(group_id)), None


class LoadedState:
    """The last value of every key seen while replaying the log (tombstones delete)."""

    def __init__(self) -> None:
        self.offsets: dict[str, dict[tuple[str, int], OffsetValue]] = {}
        self.groups: dict[str, GroupValue] = {}

    def apply(self, key: bytes, value: bytes | None) -> None:
        k = decode_key(key)
        if isinstance(k, OffsetKey):
            tp = (k.topic, k.partition)
            if value is None:
                group_offsets = self.offsets.get(k.group)
                if group_offsets is not None:
                    group_offsets.pop(tp, None)
            else:
                self.offsets.setdefault(k.group, {})[tp] = decode_offset_value(value)
        else:
            if value is None:
                self.groups.pop(k.group, None)
            else:
                self.groups[k.group] = decode_group_value(value)

    def apply_all(self, records: Iterable[KeyValue]) -> None:
        for key, value in records:
            self.apply(key, value)
