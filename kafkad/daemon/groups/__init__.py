"""Consumer group coordinator: rebalance state machine, committed offsets, __consumer_offsets."""

from kafkad.daemon.groups.config import OFFSETS_TOPIC, GroupConfig
from kafkad.daemon.groups.coordinator import JoinRequest
from kafkad.daemon.groups.group import (
    GroupState,
    GroupSummary,
    JoinResult,
    MemberSummary,
    Protocol,
    SyncResult,
)
from kafkad.daemon.groups.group_coordinator import (
    GroupCoordinator,
    GroupListing,
    OffsetCommit,
)
from kafkad.daemon.groups.records import partition_for
from kafkad.daemon.groups.store import GroupStore, MemoryStore
from kafkad.daemon.groups.timers import LoopScheduler, ManualScheduler, Scheduler

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
