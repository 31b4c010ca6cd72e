"""The full group coordinator: membership (coordinator.py) plus offsets, admin APIs, load, expiry.

Committed offsets live in `Group.offsets` and are written to the store before a commit is
answered. `load(records)` replays __consumer_offsets at start: groups with members come back
Stable (members keep their slots and assignments and get a fresh session timer), groups without
members come back Empty. Every `offsets.retention.check.interval.ms` the expiry pass drops
offsets of Empty groups idle for `offsets.retention.minutes` (writing tombstones) and removes
Empty groups left without offsets. Transactional offset commits (TxnOffsetCommit) and the markers that
make them visible are the `TxnOffsets` mixin's (txn_offsets.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from kafkad.clock import Clock
from kafkad.coordinator.group.config import GroupConfig
from kafkad.coordinator.group.coordinator import MembershipCoordinator
from kafkad.coordinator.group.group import (
    Group,
    GroupState,
    GroupSummary,
    JoinResult,
    Member,
    Protocol,
    SyncResult,
)
from kafkad.coordinator.group.records import OffsetValue
from kafkad.coordinator.group.store import (
    GroupStore,
    KeyValue,
    LoadedState,
    Replayed,
    group_tombstone,
    offset_record,
)
from kafkad.coordinator.group.subscriptions import CONSUMER_PROTOCOL_TYPE, subscribed_topics
from kafkad.coordinator.group.timers import Scheduler, TimerHandle
from kafkad.coordinator.group.txn_offsets import TxnOffsets
from kafkad.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class OffsetCommit:
    offset: int
    leader_epoch: int = -1
    metadata: str | None = ""


@dataclass(slots=True)
class PendingCommit:
    """A cluster-mode commit appended but not yet replicated: filled by `commit_offsets`, served by
    `apply_commit` once replicated. `seq` is its place in the append order (every write of a group goes
    to one partition, in call order), so commits applied out of order keep the newest append, as Kafka's
    onOffsetCommitAppend compares appendedBatchOffset. Mutable: the coordinator fills it in."""

    offsets: dict[TopicPartition, OffsetValue] = field(default_factory=dict)
    seq: int = -1


@dataclass(frozen=True, slots=True)
class GroupListing:
    group_id: str
    protocol_type: str
    state: GroupState


_SIZE_ERRORS = {
    ErrorCode.MESSAGE_TOO_LARGE,
    ErrorCode.RECORD_LIST_TOO_LARGE,
    ErrorCode.INVALID_FETCH_SIZE,
}


def _store_error(exc: Exception) -> ErrorCode:
    """Kafka's mapping of a failed offsets append to what a committing client is told."""
    if isinstance(exc, KafkaError):
        if exc.code in _SIZE_ERRORS:
            return ErrorCode.INVALID_COMMIT_OFFSET_SIZE
        if exc.code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
            return ErrorCode.NOT_COORDINATOR
    return ErrorCode.COORDINATOR_NOT_AVAILABLE


class GroupCoordinator(TxnOffsets, MembershipCoordinator):
    def __init__(
        self,
        config: GroupConfig,
        clock: Clock,
        scheduler: Scheduler,
        store: GroupStore,
        partition_exists: Callable[[str, int], bool] | None = None,
    ) -> None:
        super().__init__(config, clock, scheduler, store)
        self.partition_exists = partition_exists
        self._expiry_timer: TimerHandle | None = None
        # group id -> commits appended but not yet replicated (`pending`, cluster mode): such a group has
        # offsets for the expiry pass (Kafka's hasOffsets counts pendingOffsetCommits)
        self._replicating: dict[str, int] = {}
        self._append_seq = 0  # PendingCommit.seq of the last pending commit appended
        self._txn_groups: dict[int, set[str]] = {}
        self.offsets_partition_count = config.offsets_topic_num_partitions

    # --- OffsetCommit / OffsetFetch ----------------------------------------------------------

    def commit_offsets(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        instance_id: str | None,
        offsets: Mapping[TopicPartition, OffsetCommit],
        *,
        pending: PendingCommit | None = None,
    ) -> dict[TopicPartition, ErrorCode]:
        """Validate and append the commit. The offsets are visible to OffsetFetch at once, or, with
        `pending` (cluster mode: the append must reach the ISR first), put there for `apply_commit`
        once it has (Kafka's pendingOffsetCommits: a commit that fails to replicate is never served)."""
        if not group_id:
            return dict.fromkeys(offsets, ErrorCode.INVALID_GROUP_ID)
        group = self.groups.get(group_id)
        if group is None:
            if generation_id >= 0:
                # a member of a group we no longer know: its generation is gone
                return dict.fromkeys(offsets, ErrorCode.ILLEGAL_GENERATION)
            group = self._new_group(group_id)  # "simple" commit of an assign() consumer
        error = self._validate_commit(group, generation_id, member_id, instance_id)
        if error is not None:
            return dict.fromkeys(offsets, error)
        # One pass: validate, build the value and its record; one store write for the whole request.
        results: dict[TopicPartition, ErrorCode] = {}
        accepted: dict[TopicPartition, OffsetValue] = {}
        records: list[KeyValue] = []
        now = self.clock.time_ms()
        max_metadata = self.config.offset_metadata_max_bytes
        exists = self.partition_exists
        for tp, commit in offsets.items():
            metadata = commit.metadata or ""
            # UTF-8 takes at most 4 bytes a character: short metadata needs no encoding to check
            if len(metadata) * 4 > max_metadata and len(metadata.encode()) > max_metadata:
                results[tp] = ErrorCode.OFFSET_METADATA_TOO_LARGE
            elif exists is not None and not exists(tp[0], tp[1]):
                results[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                value = OffsetValue(commit.offset, commit.leader_epoch, metadata, now)
                accepted[tp] = value
                records.append(offset_record(group_id, tp[0], tp[1], value))
        if records:
            try:
                self.store.write(group_id, records)
            except Exception as exc:
                log.warning("group %s: offset commit not persisted: %s", group_id, exc)
                code = _store_error(exc)
                results.update(dict.fromkeys(accepted, code))
                return results
            if pending is None:
                group.offsets.update(accepted)
                if group.pending_txn:  # a later marker must not put an older transactional offset over these
                    self._append_seq += 1
                    group.offset_seqs.update(dict.fromkeys(accepted, self._append_seq))
            else:
                pending.offsets.update(accepted)
                self._append_seq += 1
                pending.seq = self._append_seq
                self._replicating[group_id] = self._replicating.get(group_id, 0) + 1
            if results:
                results.update(dict.fromkeys(accepted, ErrorCode.NONE))
            else:
                results = dict.fromkeys(accepted, ErrorCode.NONE)
        member = group.members.get(member_id) if member_id else None
        if member is not None:
            self._touch(group, member)
        return results

    def apply_commit(self, group_id: str, pending: PendingCommit, replicated: bool) -> None:
        """A `pending` commit is replicated: OffsetFetch serves it (unless the group went meanwhile, or a
        commit appended after it was applied first); not `replicated`: it is dropped. Either way it is no
        longer pending."""
        left = self._replicating.get(group_id, 0) - 1
        if left > 0:
            self._replicating[group_id] = left
        else:
            self._replicating.pop(group_id, None)
        group = self.groups.get(group_id)
        if replicated and group is not None and group.state is not GroupState.DEAD:
            seqs, seq = group.offset_seqs, pending.seq
            for tp, value in pending.offsets.items():
                if seqs.get(tp, -1) < seq:
                    group.offsets[tp] = value
                    seqs[tp] = seq

    @staticmethod
    def _validate_commit(
        group: Group, generation_id: int, member_id: str, instance_id: str | None
    ) -> ErrorCode | None:
        if group.state is GroupState.DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if generation_id < 0 and not member_id and instance_id is None:
            if group.state is GroupState.EMPTY:
                return None
            # a group managed by the coordinator does not take anonymous commits
            return ErrorCode.UNKNOWN_MEMBER_ID
        error = group.validate_member(member_id, instance_id)
        if error is not None:
            return error
        if group.state is GroupState.COMPLETING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        return None

    def fetch_offsets(
        self, group_id: str, partitions: Sequence[TopicPartition] | None
    ) -> tuple[ErrorCode, dict[TopicPartition, OffsetValue | None]]:
        """Committed offsets (None = nothing committed); `partitions=None` means all of them (with
        require_stable, those of `unstable_partitions` answer UNSTABLE_OFFSET_COMMIT instead)."""
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID, {}
        group = self.groups.get(group_id)
        stored = group.offsets if group is not None else {}
        if partitions is None:
            return ErrorCode.NONE, {tp: v for tp, v in stored.items()}
        return ErrorCode.NONE, {tp: stored.get(tp) for tp in partitions}

    # --- ListGroups / DescribeGroups / DeleteGroups ------------------------------------------

    def list_groups(self) -> list[GroupListing]:
        return [
            GroupListing(g.group_id, g.protocol_type or "", g.state)
            for g in self.groups.values()
            if g.state is not GroupState.DEAD
        ]

    def describe_group(self, group_id: str) -> tuple[ErrorCode, GroupSummary]:
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID, GroupSummary(group_id, GroupState.DEAD, "", "", ())
        group = self.groups.get(group_id)
        if group is None:
            # Kafka describes an unknown group as Dead with no error
            return ErrorCode.NONE, GroupSummary(group_id, GroupState.DEAD, "", "", ())
        return ErrorCode.NONE, group.summary()

    def delete_groups(self, group_ids: Iterable[str]) -> dict[str, ErrorCode]:
        results: dict[str, ErrorCode] = {}
        for group_id in group_ids:
            group = self.groups.get(group_id)
            if not group_id:
                results[group_id] = ErrorCode.INVALID_GROUP_ID
            elif group is None or group.state is GroupState.DEAD:
                results[group_id] = ErrorCode.GROUP_ID_NOT_FOUND
            elif group.state is not GroupState.EMPTY or group.members:
                results[group_id] = ErrorCode.NON_EMPTY_GROUP
            else:
                results[group_id] = self._delete(group)
        return results

    def _delete(self, group: Group) -> ErrorCode:
        records: list[KeyValue] = [offset_record(group.group_id, t, p, None) for (t, p) in group.offsets]
        records.append(group_tombstone(group.group_id))
        try:
            self.store.write(group.group_id, records, cleanup=True)
        except Exception as exc:
            log.warning("group %s: delete not persisted: %s", group.group_id, exc)
            return _store_error(exc)
        for timer in group.pending_members.values():
            timer.cancel()
        group.pending_members.clear()
        self._transition(group, GroupState.DEAD)
        del self.groups[group.group_id]
        log.info("group %s deleted", group.group_id)
        return ErrorCode.NONE

    # --- OffsetDelete ---------------------------------------------------------------------------

    def delete_offsets(
        self, group_id: str, partitions: Sequence[TopicPartition]
    ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        """Kafka's handleDeleteOffsets: an Empty group loses the offsets; a live consumer group loses those
        of topics no member subscribes to (GROUP_SUBSCRIBED_TO_TOPIC for the others); any other live
        group is NON_EMPTY_GROUP. The group error, then per-partition errors."""
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID, {}
        group = self.groups.get(group_id)
        if group is None or group.state is GroupState.DEAD:
            return ErrorCode.GROUP_ID_NOT_FOUND, {}
        results: dict[TopicPartition, ErrorCode] = {}
        if group.state is GroupState.EMPTY:
            deletable = list(partitions)
        elif group.protocol_type == CONSUMER_PROTOCOL_TYPE:
            subscribed = subscribed_topics(group)
            deletable = []
            for tp in partitions:
                if subscribed is None or tp[0] in subscribed:
                    results[tp] = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
                else:
                    deletable.append(tp)
        else:
            return ErrorCode.NON_EMPTY_GROUP, {}
        present = [tp for tp in deletable if tp in group.offsets]
        if present:
            try:
                self.store.write(
                    group_id, [offset_record(group_id, t, p, None) for (t, p) in present], cleanup=True
                )
            except Exception as exc:
                log.warning("group %s: offset delete not persisted: %s", group_id, exc)
                return _store_error(exc), {}
            for tp in present:
                del group.offsets[tp]
        for (
            pending
        ) in group.pending_txn.values():  # Kafka's removeOffsets: a later marker must not revive them
            for tp in deletable:
                pending.pop(tp, None)
        results.update(dict.fromkeys(deletable, ErrorCode.NONE))
        return ErrorCode.NONE, results

    # --- load at start -----------------------------------------------------------------------

    def load(self, records: Iterable[Replayed]) -> None:
        """Rebuild groups and offsets from the replayed __consumer_offsets records."""
        state = LoadedState()
        state.apply_all(records)
        for group_id in state.groups.keys() | state.offsets.keys():
            value = state.groups.get(group_id)
            if value is None and not state.offsets.get(group_id):
                continue  # every offset of a metadata-less group was deleted
            group = Group(group_id, state_timestamp_ms=self.clock.time_ms())
            group.offsets = dict(state.offsets.get(group_id, {}))
            if value is not None:
                group.generation_id = value.generation
                group.protocol_type = value.protocol_type or None
                group.protocol_name = value.protocol
                if value.current_state_timestamp >= 0:
                    group.state_timestamp_ms = value.current_state_timestamp
                for mv in value.members:
                    member = Member(
                        mv.member_id,
                        mv.group_instance_id,
                        mv.client_id,
                        mv.client_host,
                        mv.rebalance_timeout,
                        mv.session_timeout,
                        value.protocol_type,
                        (Protocol(value.protocol or "", mv.subscription),),
                        assignment=mv.assignment,
                    )
                    group.add(member)
                if group.members:
                    group.leader_id = value.leader if value.leader in group.members else None
                    group.leader_id = group.leader_id or next(iter(group.members))
                    group.state = GroupState.STABLE
                    for m in group.members.values():
                        self._touch(group, m)
            replaced = self.groups.get(group_id)
            if replaced is not None:  # a reload (a new leader epoch): the old object's timers must stop
                self._release(replaced)
            self.groups[group_id] = group
        self._load_pending(state)
        log.info("loaded %d groups from the offsets topic", len(self.groups))

    # --- offset expiry -----------------------------------------------------------------------

    def start_expiry(self) -> None:
        interval = self.config.offsets_retention_check_interval_ms

        def tick() -> None:
            self.expire_offsets()
            self._expiry_timer = self.scheduler.call_later(interval, tick)

        self._expiry_timer = self.scheduler.call_later(interval, tick)

    def stop(self) -> None:
        """Cancel every timer and answer parked Join/Sync requests with NOT_COORDINATOR."""
        if self._expiry_timer is not None:
            self._expiry_timer.cancel()
            self._expiry_timer = None
        for group in self.groups.values():
            self._release(group)

    def unload_groups(self, group_ids: Iterable[str]) -> None:
        """Another broker coordinates these groups now (cluster mode): forget them, answering their parked
        Join/Sync requests with NOT_COORDINATOR."""
        for group_id in group_ids:
            group = self.groups.pop(group_id, None)
            if group is not None:
                self._release(group)

    @staticmethod
    def _release(group: Group) -> None:
        for m in group.members.values():
            if m.heartbeat_timer is not None:
                m.heartbeat_timer.cancel()
            # parked requests must not hold up the broker's drain: send them elsewhere
            if m.join_callback is not None:
                callback, m.join_callback = m.join_callback, None
                callback(JoinResult(ErrorCode.NOT_COORDINATOR, m.member_id))
            if m.sync_callback is not None:
                sync_callback, m.sync_callback = m.sync_callback, None
                sync_callback(SyncResult(ErrorCode.NOT_COORDINATOR))
        if group.join_timer is not None:
            group.join_timer.cancel()
        for timer in group.pending_members.values():
            timer.cancel()

    def expire_offsets(self) -> int:
        """Drop expired offsets of Empty groups and remove groups left with nothing; count them."""
        now = self.clock.time_ms()
        retention = self.config.offsets_retention_ms
        removed = 0
        for group in list(self.groups.values()):
            if group.state is not GroupState.EMPTY:
                continue
            if group.protocol_type:
                # a consumer group: everything expires once it has been empty long enough
                expired = list(group.offsets) if now - group.state_timestamp_ms >= retention else []
            else:
                expired = [tp for tp, v in group.offsets.items() if now - v.commit_timestamp >= retention]
            records = [offset_record(group.group_id, t, p, None) for (t, p) in expired]
            drop_group = (
                len(expired) == len(group.offsets)
                and not group.pending_members
                and not group.pending_txn
                and group.group_id not in self._replicating
            )
            if drop_group:
                records.append(group_tombstone(group.group_id))
            if not records:
                continue
            try:
                self.store.write(group.group_id, records, cleanup=True)
            except Exception:
                log.exception("group %s: writing expiry tombstones failed", group.group_id)
                continue
            for tp in expired:
                del group.offsets[tp]
            removed += len(expired)
            if drop_group:
                self._transition(group, GroupState.DEAD)
                del self.groups[group.group_id]
                log.info("group %s expired", group.group_id)
        return removed
