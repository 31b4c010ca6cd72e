"""Transactional offset commits (TxnOffsetCommit), the group coordinator's part of exactly-once.

A consume-transform-produce transaction commits its input offsets with TxnOffsetCommit: the offsets are
appended to the group's __consumer_offsets partition as a transactional batch of the producer (id,
epoch), and held in `Group.pending_txn` until that producer's transaction marker is written to the
partition (`on_txn_marker`, called by replication/txn_markers.write_markers on the partition's leader):
a COMMIT makes them the group's committed offsets, an ABORT drops them (Kafka's GroupMetadataManager
prepareTxnOffsetCommit / handleTxnCompletion / GroupMetadata.completePendingTxnOffsetCommit). Until then
OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT for those partitions, so a consumer of the
group does not start from an offset the transaction may still roll back.

Order: every commit of a group gets a place in the group partition's append order (`_append_seq`), and
a marker applies a pending offset only over an older one, as Kafka compares appendedBatchOffset. Loading
the partition replays the same rules (store.LoadedState); transactions still open at its end come back
pending, waiting for the marker the transaction coordinator resends.
Runs on the event loop (the coordinator's own thread of control); never blocks.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from kafkad.coordinator.group.group import Group, GroupState
from kafkad.coordinator.group.records import OffsetValue, partition_for
from kafkad.coordinator.group.store import KeyValue, LoadedState, Producer, offset_record
from kafkad.protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from kafkad.clock import Clock
    from kafkad.coordinator.group.config import GroupConfig
    from kafkad.coordinator.group.group_coordinator import OffsetCommit
    from kafkad.coordinator.group.store import GroupStore

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]

# A failed transactional append, as Kafka's maybeConvertOffsetCommitError maps it; producer errors
# (a fenced epoch, a wrong transaction state) reach the client as they are.
_APPEND_ERRORS = {
    ErrorCode.NETWORK_EXCEPTION: ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
    ErrorCode.MESSAGE_TOO_LARGE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
    ErrorCode.RECORD_LIST_TOO_LARGE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
    ErrorCode.INVALID_FETCH_SIZE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
}


def txn_append_error(exc: Exception) -> ErrorCode:
    if isinstance(exc, KafkaError):
        return _APPEND_ERRORS.get(exc.code, exc.code)
    return ErrorCode.COORDINATOR_NOT_AVAILABLE


class TxnOffsets:
    """Mixin of GroupCoordinator: TxnOffsetCommit, transaction markers, require_stable, load."""

    groups: dict[str, Group]
    store: GroupStore
    clock: Clock
    config: GroupConfig
    partition_exists: Callable[[str, int], bool] | None
    _append_seq: int
    # producer id -> groups with offsets of its transaction pending (Kafka's openGroupsForProducer)
    _txn_groups: dict[int, set[str]]
    # __consumer_offsets partitions: how a marker's partition names its groups (LogGroupStore's count)
    offsets_partition_count: int

    if TYPE_CHECKING:

        def _new_group(self, group_id: str) -> Group: ...

    def commit_txn_offsets(
        self,
        group_id: str,
        producer: Producer,
        generation_id: int,
        member_id: str,
        instance_id: str | None,
        offsets: Mapping[TopicPartition, OffsetCommit],
    ) -> dict[TopicPartition, ErrorCode]:
        """Validate and append the offsets as `producer`'s transactional batch; they stay pending (not
        served by OffsetFetch) until the producer's marker. Kafka's handleTxnCommitOffsets."""
        if not group_id:
            return dict.fromkeys(offsets, ErrorCode.INVALID_GROUP_ID)
        group = self.groups.get(group_id) or self._new_group(group_id)
        error = _validate_txn_commit(group, generation_id, member_id, instance_id)
        if error is not None:
            return dict.fromkeys(offsets, error)
        results: dict[TopicPartition, ErrorCode] = {}
        accepted: dict[TopicPartition, OffsetValue] = {}
        records: list[KeyValue] = []
        now = self.clock.time_ms()
        for tp, commit in offsets.items():
            metadata = commit.metadata or ""
            if len(metadata.encode()) > self.config.offset_metadata_max_bytes:
                results[tp] = ErrorCode.OFFSET_METADATA_TOO_LARGE
            elif self.partition_exists is not None and not self.partition_exists(tp[0], tp[1]):
                results[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                accepted[tp] = OffsetValue(commit.offset, commit.leader_epoch, metadata, now)
                records.append(offset_record(group_id, tp[0], tp[1], accepted[tp]))
        if not records:
            return results
        try:
            self.store.write(group_id, records, producer=producer)
        except Exception as exc:
            log.info("group %s: transactional offset commit of producer %d not appended: %s",
                     group_id, producer.producer_id, exc)  # fmt: skip
            results.update(dict.fromkeys(accepted, txn_append_error(exc)))
            return results
        self._append_seq += 1
        seq = self._append_seq
        pending = group.pending_txn.setdefault(producer.producer_id, {})
        for tp, value in accepted.items():
            pending[tp] = (value, seq)
        self._txn_groups.setdefault(producer.producer_id, set()).add(group_id)
        results.update(dict.fromkeys(accepted, ErrorCode.NONE))
        return results

    def fail_txn_commit(self, group_id: str, producer_id: int, partitions: Sequence[TopicPartition]) -> None:
        """The appended commit did not reach the ISR (cluster mode): it is not pending any more (Kafka's
        failPendingTxnOffsetCommit); the client retries, perhaps on another coordinator."""
        group = self.groups.get(group_id)
        if group is None:
            return
        pending = group.pending_txn.get(producer_id)
        if pending is None:
            return
        for tp in partitions:
            pending.pop(tp, None)
        if not pending:
            del group.pending_txn[producer_id]
            self._forget(producer_id, group_id)

    def on_txn_marker(self, partition: int, producer_id: int, committed: bool) -> None:
        """`producer_id`'s transaction marker was appended to __consumer_offsets-`partition` (this broker
        leads it): its pending offsets of the groups in that partition become committed, or vanish."""
        groups = self._txn_groups.get(producer_id)
        if not groups:
            return
        n = self.offsets_partition_count
        for group_id in [g for g in groups if partition_for(g, n) == partition]:
            self._forget(producer_id, group_id)
            group = self.groups.get(group_id)
            if group is None or group.state is GroupState.DEAD:
                continue
            pending = group.pending_txn.pop(producer_id, None)
            if pending is None or not committed:
                continue
            seqs = group.offset_seqs
            for tp, (value, seq) in pending.items():
                if seqs.get(tp, -1) < seq:
                    group.offsets[tp] = value
                    seqs[tp] = seq

    def _forget(self, producer_id: int, group_id: str) -> None:
        groups = self._txn_groups.get(producer_id)
        if groups is not None:
            groups.discard(group_id)
            if not groups:
                del self._txn_groups[producer_id]

    def unstable_partitions(self, group_id: str) -> set[TopicPartition]:
        """Partitions of the group with a transactional commit pending (require_stable answers
        UNSTABLE_OFFSET_COMMIT for them)."""
        group = self.groups.get(group_id)
        if group is None or not group.pending_txn:
            return set()
        return {tp for pending in group.pending_txn.values() for tp in pending}

    def _load_pending(self, state: LoadedState) -> None:
        """After a replay: transactions still open at the end of the log come back pending (their groups
        are created Empty if the log holds nothing else of them), ordered after what was loaded."""
        base = self._append_seq
        for producer_id, entries in state.pending.items():
            for (group_id, tp), (value, position) in entries.items():
                if value is None:
                    continue
                group = self.groups.get(group_id) or self._new_group(group_id)
                group.pending_txn.setdefault(producer_id, {})[tp] = (value, base + position)
                loaded_at = state.positions.get((group_id, tp))
                if loaded_at is not None and tp in group.offsets:
                    group.offset_seqs[tp] = base + loaded_at
                self._txn_groups.setdefault(producer_id, set()).add(group_id)
        self._append_seq = base + state.position


def _validate_txn_commit(
    group: Group, generation_id: int, member_id: str, instance_id: str | None
) -> ErrorCode | None:
    """Kafka's validateOffsetCommit(isTransactional = true): a producer without group membership (older
    clients send no member or generation) may commit to a live group."""
    if group.state is GroupState.DEAD:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if generation_id < 0 and group.state is GroupState.EMPTY:
        return None
    if generation_id >= 0 or member_id or instance_id is not None:
        error = group.validate_member(member_id, instance_id)
        if error is not None:
            return error
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
    return None
