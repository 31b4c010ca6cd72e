"""Partition/replica state tables and Kafka's leader election algorithms."""

from __future__ import annotations

import pytest

from kafkad.controller.state_machines import (
    Election,
    controlled_shutdown_election,
    offline_election,
    partition_transition_ok,
    preferred_election,
    reassign_election,
    replica_transition_ok,
)
from kafkad.controller.state_machines import (
    PartitionStateName as P,
)
from kafkad.controller.state_machines import (
    ReplicaStateName as R,
)


@pytest.mark.parametrize(
    ("old", "new", "ok"),
    [
        (P.NON_EXISTENT, P.NEW, True),
        (P.NEW, P.ONLINE, True),
        (P.OFFLINE, P.ONLINE, True),
        (P.ONLINE, P.OFFLINE, True),
        (P.OFFLINE, P.NON_EXISTENT, True),
        (P.ONLINE, P.NEW, False),
        (P.ONLINE, P.NON_EXISTENT, False),
        (P.NON_EXISTENT, P.ONLINE, False),
        (R.NON_EXISTENT, R.NEW, True),
        (R.NEW, R.ONLINE, True),
        (R.ONLINE, R.OFFLINE, True),
        (R.OFFLINE, R.DELETION_STARTED, True),
        (R.DELETION_STARTED, R.DELETION_SUCCESSFUL, True),
        (R.DELETION_SUCCESSFUL, R.NON_EXISTENT, True),
        (R.ONLINE, R.DELETION_STARTED, False),
        (R.NON_EXISTENT, R.ONLINE, False),
    ],
)
def test_transitions(old: P | R, new: P | R, ok: bool) -> None:
    if isinstance(old, P):
        assert isinstance(new, P) and partition_transition_ok(old, new) is ok
    else:
        assert isinstance(new, R) and replica_transition_ok(old, new) is ok


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
