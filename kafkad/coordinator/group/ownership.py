"""The group coordinator following __consumer_offsets leadership (cluster mode; Kafka's
GroupCoordinator.onElection / onResignation).

A broker coordinates exactly the groups whose __consumer_offsets partition it leads. When it becomes that
partition's leader it replays the partition (in the executor) into the coordinator; until the replay is in,
the partition's groups answer COORDINATOR_LOAD_IN_PROGRESS. When it stops leading it unloads those groups:
their timers stop and parked JoinGroup/SyncGroup requests are answered NOT_COORDINATOR, as is every later
request for them (the client then asks FindCoordinator again). An OffsetCommit, and a SyncGroup (the group's
assignment record), is answered once the partition's ISR has it (Kafka's offsets.commit.required.acks=-1),
so a commit or an assignment survives the coordinator's loss. Standalone brokers have no GroupOwnership:
the group handlers' check is one dict lookup.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from kafkad.coordinator.group.config import OFFSETS_TOPIC
from kafkad.coordinator.group.log_store import replay_partition
from kafkad.coordinator.group.records import partition_for
from kafkad.protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from kafkad.api.broker import Broker
    from kafkad.coordinator.group.group_coordinator import GroupCoordinator
    from kafkad.replication.partition import Partition

log = logging.getLogger(__name__)

COMMIT_TIMEOUT_S = 5.0  # Kafka's offsets.commit.timeout.ms default


class GroupOwnership:
    def __init__(self, broker: Broker, num_partitions: int) -> None:
        self.broker = broker
        self.num_partitions = num_partitions
        self.loaded: set[int] = set()
        self._loading: dict[int, asyncio.Task[None]] = {}

    def error_for(self, group_id: str) -> ErrorCode | None:
        """None if this broker coordinates `group_id` now, else the error to answer."""
        index = partition_for(group_id, self.num_partitions)
        if index in self.loaded:
            return None
        if index in self._loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return ErrorCode.NOT_COORDINATOR

    # --- leadership listener ------------------------------------------------------------------------
    def on_leader(self, part: Partition) -> None:
        if part.topic != OFFSETS_TOPIC:
            return
        index = part.index
        self.loaded.discard(index)
        old = self._loading.pop(index, None)
        if old is not None:
            old.cancel()
        self._loading[index] = asyncio.get_running_loop().create_task(self._load(part, part.leader_epoch))

    def on_follower(self, part: Partition) -> None:
        if part.topic != OFFSETS_TOPIC:
            return
        index = part.index
        task = self._loading.pop(index, None)
        if task is not None:
            task.cancel()
        if index in self.loaded:
            self.loaded.discard(index)
            coordinator = self._coordinator()
            if coordinator is not None:
                gone = [g for g in coordinator.groups if partition_for(g, self.num_partitions) == index]
                coordinator.unload_groups(gone)
                log.info("%s-%d: no longer its leader; unloaded %d groups", OFFSETS_TOPIC, index, len(gone))

    async def _load(self, part: Partition, epoch: int) -> None:
        index = part.index
        try:
            loop = asyncio.get_running_loop()
            end = part.log_end_offset
            records = await loop.run_in_executor(None, lambda: list(replay_partition(part, end=end)))
            coordinator = self._coordinator()
            if coordinator is None or not part.is_leader or part.leader_epoch != epoch:
                return
            # what was appended during the replay, read on the loop: a transaction marker written then
            # found no group to tell (on_txn_marker), so the load must see it
            records += replay_partition(part, start=end)
            coordinator.load(records)
            self.loaded.add(index)
            log.info("%s-%d: leader; loaded %d records of its groups", OFFSETS_TOPIC, index, len(records))
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("%s-%d: loading its groups failed", OFFSETS_TOPIC, index)
        finally:
            if self._loading.get(index) is asyncio.current_task():
                del self._loading[index]

    def _coordinator(self) -> GroupCoordinator | None:
        from kafkad.coordinator.group.service import coordinator_for

        try:
            return coordinator_for(self.broker)
        except KafkaError:
            return None


def check_coordinator(broker: Broker, group_id: str) -> None:
    """Raise KafkaError(NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS) for a group coordinated elsewhere
    (cluster mode only; standalone coordinates everything)."""
    own = broker.group_ownership
    if own is not None:
        code = own.error_for(group_id)
        if code is not None:
            raise KafkaError(code, f"group {group_id!r} is not coordinated by this broker")


async def commit_replicated(
    own: GroupOwnership, group_id: str, *, timed_out: ErrorCode = ErrorCode.REQUEST_TIMED_OUT
) -> ErrorCode | None:
    """Kafka's offsets.commit.required.acks=-1: wait until the group's __consumer_offsets partition has
    replicated what was just appended to it (its ISR, at least min.insync.replicas); the error to answer
    instead, or None. As GroupMetadataManager maps a failed append: NOT_ENOUGH_REPLICAS(_AFTER_APPEND) ->
    COORDINATOR_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER -> NOT_COORDINATOR, a timeout -> `timed_out`
    (REQUEST_TIMED_OUT for offset commits, COORDINATOR_NOT_AVAILABLE for group metadata: storeGroup)."""
    part = own.broker.replicas.get(OFFSETS_TOPIC, partition_for(group_id, own.num_partitions))
    if part is None or not part.is_leader:
        return ErrorCode.NOT_COORDINATOR
    last = part.log_end_offset - 1
    try:
        if part.high_watermark > last:
            if len(part.isr) < int(getattr(part.log.config, "min_insync_replicas", 1)):  # shrank since
                return ErrorCode.COORDINATOR_NOT_AVAILABLE
            return None
        await asyncio.wait_for(part.wait_replicated(last), COMMIT_TIMEOUT_S)
    except TimeoutError:
        return timed_out
    except KafkaError as e:  # Kafka's mapping of a failed offsets append
        return (
            ErrorCode.NOT_COORDINATOR
            if e.code is ErrorCode.NOT_LEADER_OR_FOLLOWER
            else ErrorCode.COORDINATOR_NOT_AVAILABLE
        )
    return None


def group_error(broker: Broker, group_id: str) -> ErrorCode | None:
    own = broker.group_ownership
    return None if own is None else own.error_for(group_id)


def install(broker: Broker) -> GroupOwnership:
    """Cluster mode: follow __consumer_offsets leadership (before any LeaderAndIsr arrives)."""
    own = GroupOwnership(broker, broker.config.group.offsets_topic_num_partitions)
    broker.group_ownership = own
    broker.replicas.add_leadership_listener(own.on_leader, own.on_follower)
    return own
