"""Partition/replica state tables and Kafka's leader election algorithms."""

from __future__ import annotations

from kafkad.election.state_machines import (
    Election,
    controlled_shutdown_election,
    offline_election,
    partition_transition_ok,
    preferred_election,
    reassign_election,
    replica_transition_ok,
)
from kafkad.election.state_machines import (
    PartitionStateName as P,
)
from kafkad.election.state_machines import (
    ReplicaStateName as R,
)


def test_partition_transitions() -> None:
    assert partition_transition_ok(P.NON_EXISTENT, P.NEW)
    assert partition_transition_ok(P.NEW, P.ONLINE)
    assert partition_transition_ok(P.OFFLINE, P.ONLINE)
    assert partition_transition_ok(P.ONLINE, P.OFFLINE)
    assert partition_transition_ok(P.OFFLINE, P.NON_EXISTENT)
    assert not partition_transition_ok(P.ONLINE, P.NEW)
    assert not partition_transition_ok(P.ONLINE, P.NON_EXISTENT)
    assert not partition_transition_ok(P.NON_EXISTENT, P.ONLINE)


def test_replica_transitions() -> None:
    assert replica_transition_ok(R.NON_EXISTENT, R.NEW)
    assert replica_transition_ok(R.NEW, R.ONLINE)
    assert replica_transition_ok(R.ONLINE, R.OFFLINE)
    assert replica_transition_ok(R.OFFLINE, R.DELETION_STARTED)
    assert replica_transition_ok(R.DELETION_STARTED, R.DELETION_SUCCESSFUL)
    assert replica_transition_ok(R.DELETION_SUCCESSFUL, R.NON_EXISTENT)
    assert not replica_transition_ok(R.ONLINE, R.DELETION_STARTED)
    assert not replica_transition_ok(R.NON_EXISTENT, R.ONLINE)


def test_offline_election_prefers_assignment_order_within_isr() -> None:
    assert offline_election([1, 2, 3], [3, 2], {2, 3}, False) == Election(2, (3, 2))
    assert offline_election([1, 2, 3], [1, 3], {2, 3}, False) == Election(3, (3,))
    # nobody in the ISR is alive: no leader unless unclean election is allowed
    assert offline_election([1, 2, 3], [1], {2, 3}, False) is None
    assert offline_election([1, 2, 3], [1], {2, 3}, True) == Election(2, (2,), unclean=True)
    assert offline_election([1, 2], [1], set(), True) is None


def test_other_elections() -> None:
    assert preferred_election([2, 1], [1, 2], {1, 2}) == Election(2, (1, 2))
    assert preferred_election([2, 1], [1], {1, 2}) is None
    assert preferred_election([2, 1], [1, 2], {1}) is None
    assert reassign_election([4, 5], [5, 1], {4, 5}) == Election(5, (5, 1))
    assert controlled_shutdown_election([1, 2, 3], [1, 2, 3], {1, 2, 3}, {1}) == Election(2, (2, 3))
    assert controlled_shutdown_election([1, 2], [1], {1, 2}, {1}) is None
