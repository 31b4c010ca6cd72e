"""What the coordinator persists, as __consumer_offsets key/value pairs, and where it goes.

The coordinator calls `GroupStore.write(group_id, records)` synchronously before answering a
commit or completing a rebalance; a raised exception means "not persisted" and becomes an error
code for the client. `MemoryStore` keeps the pairs in a list (tests, and a broker without disks);
`log_store.LogGroupStore` appends them to the partition of the internal topic.

Transactional offset commits (TxnOffsetCommit) are written as a transactional batch of the producer
(`producer=`); replaying the log yields their records as `TxnRecord`s and each COMMIT/ABORT marker of
the partition as a `TxnEnd`, which `LoadedState` turns into committed offsets, dropped ones, or offsets
still pending at the end of the log (Kafka's GroupMetadataManager.doLoadGroupsAndOffsets).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NamedTuple, Protocol

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


class Producer(NamedTuple):
    """The transactional producer a TxnOffsetCommit is written for."""

    producer_id: int
    producer_epoch: int


class TxnRecord(NamedTuple):
    """Replay: a record of a transactional batch (an offset commit pending until its marker)."""

    key: bytes
    value: bytes | None
    producer_id: int


class TxnEnd(NamedTuple):
    """Replay: a transaction marker of `producer_id` in the partition."""

    producer_id: int
    committed: bool


Replayed = KeyValue | TxnRecord | TxnEnd


class GroupStore(Protocol):
    def write(
        self,
        group_id: str,
        records: Sequence[KeyValue],
        *,
        cleanup: bool = False,
        producer: Producer | None = None,
    ) -> None:
        """Persist `records`; `cleanup`: tombstones of a group/offset deletion or expiry, which Kafka's
        cleanupGroupMetadata appends with acks=1 (everything else: offsets.commit.required.acks);
        `producer`: a transactional batch of that producer (TxnOffsetCommit)."""


class MemoryStore:
    """Keeps every written pair in order; `records` replays them into a fresh coordinator (a
    transactional write as TxnRecords; `end_txn` appends a marker)."""

    def __init__(self) -> None:
        self.records: list[Replayed] = []
        self.fail_with: Exception | None = None

    def write(
        self,
        group_id: str,
        records: Sequence[KeyValue],
        *,
        cleanup: bool = False,
        producer: Producer | None = None,
    ) -> None:
        if self.fail_with is not None:
            raise self.fail_with
        if producer is None:
            self.records.extend(records)
        else:
            self.records.extend(TxnRecord(k, v, producer.producer_id) for k, v in records)

    def end_txn(self, producer_id: int, committed: bool) -> None:
        self.records.append(TxnEnd(producer_id, committed))


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


GroupTP = tuple[str, tuple[str, int]]  # (group, (topic, partition))


class LoadedState:
    """The last value of every key seen while replaying the log (tombstones delete).

    Transactional offset commits wait in `pending` (producer id -> (group, tp) -> (value or None for a
    tombstone, position)) until their producer's marker: COMMIT applies each unless the key holds a
    newer plain commit (Kafka's olderThan by log position), ABORT drops them. What is left in `pending`
    at the end belongs to transactions still open. `position` counts the records applied, in log order;
    `positions` is the position of each offset's current value, kept only while transactions are seen.
    """

    def __init__(self) -> None:
        self.offsets: dict[str, dict[tuple[str, int], OffsetValue]] = {}
        self.groups: dict[str, GroupValue] = {}
        self.pending: dict[int, dict[GroupTP, tuple[OffsetValue | None, int]]] = {}
        self.positions: dict[GroupTP, int] = {}
        self.position = 0

    def apply(self, key: bytes, value: bytes | None) -> None:
        self.position += 1
        k = decode_key(key)
        if isinstance(k, OffsetKey):
            tp = (k.topic, k.partition)
            if value is None:
                group_offsets = self.offsets.get(k.group)
                if group_offsets is not None:
                    group_offsets.pop(tp, None)
                self.positions.pop((k.group, tp), None)
            else:
                self.offsets.setdefault(k.group, {})[tp] = decode_offset_value(value)
                if self.pending:
                    self.positions[(k.group, tp)] = self.position
        else:
            if value is None:
                self.groups.pop(k.group, None)
            else:
                self.groups[k.group] = decode_group_value(value)

    def apply_txn(self, rec: TxnRecord) -> None:
        self.position += 1
        k = decode_key(rec.key)
        if not isinstance(k, OffsetKey):  # Kafka writes only offsets transactionally
            return
        value = None if rec.value is None else decode_offset_value(rec.value)
        self.pending.setdefault(rec.producer_id, {})[(k.group, (k.topic, k.partition))] = (
            value,
            self.position,
        )

    def apply_end(self, end: TxnEnd) -> None:
        pending = self.pending.pop(end.producer_id, None)
        if pending is None or not end.committed:
            return
        for (group, tp), (value, position) in pending.items():
            group_offsets = self.offsets.setdefault(group, {})
            if tp in group_offsets and self.positions.get((group, tp), 0) > position:
                continue  # a plain commit appended after this one holds the key
            if value is None:
                group_offsets.pop(tp, None)
                self.positions.pop((group, tp), None)
            else:
                group_offsets[tp] = value
                self.positions[(group, tp)] = position

    def apply_all(self, records: Iterable[Replayed]) -> None:
        for item in records:
            if isinstance(item, TxnEnd):
                self.apply_end(item)
            elif isinstance(item, TxnRecord):
                self.apply_txn(item)
            else:
                self.apply(item[0], item[1])
