"""Kafka's partition and replica state machines as explicit tables, plus the leader election algorithms.

PartitionStateMachine.scala / ReplicaStateMachine.scala: each state lists the states it may be entered
from; a transition from anywhere else is a bug in the caller and is refused (logged, skipped), as Kafka's
`logInvalidTransition`. The election functions are Kafka's PartitionLeaderElectionAlgorithms: pure
functions of the assignment, ISR, live brokers and brokers shutting down. No I/O here.
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Sequence
from typing import NamedTuple


class PartitionStateName(enum.Enum):
    NON_EXISTENT = "NonExistentPartition"
    NEW = "NewPartition"
    ONLINE = "OnlinePartition"
    OFFLINE = "OfflinePartition"


P = PartitionStateName
PARTITION_VALID_PREVIOUS: dict[PartitionStateName, frozenset[PartitionStateName]] = {
    P.NEW: frozenset({P.NON_EXISTENT}),
    P.ONLINE: frozenset({P.NEW, P.ONLINE, P.OFFLINE}),
    P.OFFLINE: frozenset({P.NEW, P.ONLINE, P.OFFLINE}),
    P.NON_EXISTENT: frozenset({P.OFFLINE}),
}


class ReplicaStateName(enum.Enum):
    NEW = "NewReplica"
    ONLINE = "OnlineReplica"
    OFFLINE = "OfflineReplica"
    DELETION_STARTED = "ReplicaDeletionStarted"
    DELETION_SUCCESSFUL = "ReplicaDeletionSuccessful"
    DELETION_INELIGIBLE = "ReplicaDeletionIneligible"
    NON_EXISTENT = "NonExistentReplica"


R = ReplicaStateName
REPLICA_VALID_PREVIOUS: dict[ReplicaStateName, frozenset[ReplicaStateName]] = {
    R.NEW: frozenset({R.NON_EXISTENT}),
    R.ONLINE: frozenset({R.NEW, R.ONLINE, R.OFFLINE, R.DELETION_INELIGIBLE}),
    R.OFFLINE: frozenset({R.NEW, R.ONLINE, R.OFFLINE, R.DELETION_INELIGIBLE}),
    R.DELETION_STARTED: frozenset({R.OFFLINE}),
    R.DELETION_SUCCESSFUL: frozenset({R.DELETION_STARTED}),
    R.DELETION_INELIGIBLE: frozenset({R.OFFLINE, R.DELETION_STARTED}),
    R.NON_EXISTENT: frozenset({R.DELETION_SUCCESSFUL}),
}


def partition_transition_ok(current: PartitionStateName, target: PartitionStateName) -> bool:
    return current in PARTITION_VALID_PREVIOUS[target]


def replica_transition_ok(current: ReplicaStateName, target: ReplicaStateName) -> bool:
    return current in REPLICA_VALID_PREVIOUS[target]


class Election(NamedTuple):
    leader: int
    isr: tuple[int, ...]
    unclean: bool = False


def offline_election(
    assignment: Sequence[int], isr: Sequence[int], live: Collection[int], unclean_allowed: bool
) -> Election | None:
    """OfflinePartitionLeaderElection: the first live ISR member in assignment order; else, only when
    unclean election is allowed, the first live replica (ISR becomes just it)."""
    live_isr = tuple(b for b in isr if b in live)
    for b in assignment:
        if b in live and b in isr:
            return Election(b, live_isr)
    if unclean_allowed:
        for b in assignment:
            if b in live:
                return Election(b, (b,), unclean=True)
    return None


def reassign_election(target: Sequence[int], isr: Sequence[int], live: Collection[int]) -> Election | None:
    for b in target:
        if b in live and b in isr:
            return Election(b, tuple(isr))
    return None


def preferred_election(
    assignment: Sequence[int], isr: Sequence[int], live: Collection[int]
) -> Election | None:
    if assignment and assignment[0] in live and assignment[0] in isr:
        return Election(assignment[0], tuple(isr))
    return None


def controlled_shutdown_election(
    assignment: Sequence[int], isr: Sequence[int], live: Collection[int], shutting_down: Collection[int]
) -> Election | None:
    new_isr = tuple(b for b in isr if b not in shutting_down)
    for b in assignment:
        if b in live and b in isr and b not in shutting_down:
            return Election(b, new_isr)
    return None
