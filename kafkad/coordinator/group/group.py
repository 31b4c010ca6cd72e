"""One consumer group's in-memory state (Kafka's GroupMetadata and MemberMetadata).

States: Empty -> PreparingRebalance -> CompletingRebalance -> Stable, back to PreparingRebalance
on any membership change, Dead once deleted. A member holds the callbacks of its outstanding
JoinGroup/SyncGroup (the coordinator answers them later, when the rebalance moves on) and its
session timer. Plain mutable classes: this is the coordinator's working state, touched only on
the event loop.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from kafkad.coordinator.group.records import OffsetValue
from kafkad.coordinator.group.timers import TimerHandle
from kafkad.protocol.errors import ErrorCode


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True, slots=True)
class Protocol:
    name: str
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True)
class StaticReplacement:
    """What a static member's rejoin replaced when it rewrote the group record at once (Stable group):
    restored if that record fails to replicate (Kafka's updateStaticMemberAndRebalance callback)."""

    old_member_id: str
    protocols: tuple[Protocol, ...]
    session_timeout_ms: int
    rebalance_timeout_ms: int
    client_id: str
    client_host: str


@dataclass(frozen=True, slots=True)
class JoinResult:
    error: ErrorCode
    member_id: str
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    members: tuple[JoinMember, ...] = ()
    # set when this answer rewrote the group record: cluster mode waits for its replication first
    replaced: StaticReplacement | None = None


@dataclass(frozen=True, slots=True)
class SyncResult:
    error: ErrorCode
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass(frozen=True, slots=True)
class MemberSummary:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupSummary:
    group_id: str
    state: GroupState
    protocol_type: str
    protocol_data: str
    members: tuple[MemberSummary, ...]


JoinCallback = Callable[[JoinResult], None]
SyncCallback = Callable[[SyncResult], None]


@dataclass(slots=True)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: tuple[Protocol, ...]
    assignment: bytes = b""
    join_callback: JoinCallback | None = None
    sync_callback: SyncCallback | None = None
    heartbeat_timer: TimerHandle | None = None
    is_new: bool = False

    def metadata(self, protocol: str | None) -> bytes:
        for p in self.protocols:
            if p.name == protocol:
                return p.metadata
        return b""

    def protocol_names(self) -> list[str]:
        return [p.name for p in self.protocols]

    def matches(self, protocols: Sequence[Protocol]) -> bool:
        return tuple(protocols) == self.protocols


@dataclass(slots=True)
class Group:
    group_id: str
    state: GroupState = GroupState.EMPTY
    state_timestamp_ms: int = -1
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    pending_members: dict[str, TimerHandle] = field(default_factory=dict)
    offsets: dict[tuple[str, int], OffsetValue] = field(default_factory=dict)
    # the append order (PendingCommit.seq) of the commit `offsets` holds per partition: cluster mode, and
    # any group with transactional offset commits pending (a marker must not undo a newer commit)
    offset_seqs: dict[tuple[str, int], int] = field(default_factory=dict)
    # TxnOffsetCommit: producer id -> partition -> (offset, append seq), invisible until the producer's
    # COMMIT marker lands in __consumer_offsets (dropped on ABORT); OffsetFetch require_stable waits on them
    pending_txn: dict[int, dict[tuple[str, int], tuple[OffsetValue, int]]] = field(default_factory=dict)
    join_timer: TimerHandle | None = None
    initial_delay_active: bool = False
    initial_delay_remaining_ms: int = 0
    new_member_added: bool = False

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def add(self, member: Member) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        if member.heartbeat_timer is not None:
            member.heartbeat_timer.cancel()
            member.heartbeat_timer = None
        instance = member.group_instance_id
        if instance is not None and self.static_members.get(instance) == member_id:
            del self.static_members[instance]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def replace_static(self, old_member_id: str, new_member_id: str) -> Member:
        """Give a static member a new member id, keeping its slot, assignment and leadership."""
        member = self.members.pop(old_member_id)
        member.member_id = new_member_id
        self.members[new_member_id] = member
        assert member.group_instance_id is not None
        self.static_members[member.group_instance_id] = new_member_id
        if self.leader_id == old_member_id:
            self.leader_id = new_member_id
        return member

    def static_member_id(self, instance_id: str) -> str | None:
        return self.static_members.get(instance_id)

    def validate_member(self, member_id: str, instance_id: str | None) -> ErrorCode | None:
        """Kafka's validateCurrentMember: a fenced static instance, or an unknown member id."""
        if instance_id is not None:
            current = self.static_members.get(instance_id)
            if current is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if current != member_id:
                return ErrorCode.FENCED_INSTANCE_ID
            return None
        if member_id not in self.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        return None

    def candidate_protocols(self) -> list[str]:
        """Protocols every member supports, in the first member's order of preference."""
        members = list(self.members.values())
        if not members:
            return []
        common = set(members[0].protocol_names())
        for m in members[1:]:
            common &= set(m.protocol_names())
        return [p for p in members[0].protocol_names() if p in common]

    def supports_protocols(self, protocol_type: str, protocols: Sequence[Protocol]) -> bool:
        if not self.members:
            return bool(protocol_type) and bool(protocols)
        candidates = set(self.candidate_protocols())
        return self.protocol_type == protocol_type and any(p.name in candidates for p in protocols)

    def select_protocol(self) -> str:
        """Each member votes for its most preferred common protocol; the most votes wins."""
        candidates = self.candidate_protocols()
        votes = dict.fromkeys(candidates, 0)
        for m in self.members.values():
            choice = next(p for p in m.protocol_names() if p in votes)
            votes[choice] += 1
        return max(candidates, key=lambda p: votes[p])  # ties: the first in preference order

    def all_members_joined(self) -> bool:
        return not self.pending_members and all(m.join_callback is not None for m in self.members.values())

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def summary(self) -> GroupSummary:
        stable = self.state is GroupState.STABLE
        members = tuple(
            MemberSummary(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.metadata(self.protocol_name) if stable else b"",
                m.assignment if stable else b"",
            )
            for m in self.members.values()
        )
        return GroupSummary(
            self.group_id,
            self.state,
            self.protocol_type or "",
            (self.protocol_name or "") if stable else "",
            members,
        )
