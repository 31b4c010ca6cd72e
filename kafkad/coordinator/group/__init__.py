"""Consumer group coordinator: rebalance state machine, committed offsets, __consumer_offsets."""

from kafkad.coordinator.group.config import OFFSETS_TOPIC, GroupConfig
from kafkad.coordinator.group.coordinator import JoinRequest
from kafkad.coordinator.group.group import (
    GroupState,
    GroupSummary,
    JoinResult,
    MemberSummary,
    Protocol,
    SyncResult,
)
from kafkad.coordinator.group.group_coordinator import (
    GroupCoordinator,
    GroupListing,
    OffsetCommit,
)
from kafkad.coordinator.group.records import partition_for
from kafkad.coordinator.group.store import GroupStore, MemoryStore
from kafkad.coordinator.group.timers import LoopScheduler, ManualScheduler, Scheduler

__all__ = [
    "OFFSETS_TOPIC",
    "GroupConfig",
    "GroupCoordinator",
    "GroupListing",
    "GroupState",
    "GroupStore",
    "GroupSummary",
    "JoinRequest",
    "JoinResult",
    "LoopScheduler",
    "ManualScheduler",
    "MemberSummary",
    "MemoryStore",
    "OffsetCommit",
    "Protocol",
    "Scheduler",
    "SyncResult",
    "partition_for",
]
