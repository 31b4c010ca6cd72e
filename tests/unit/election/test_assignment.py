"""Replica assignment against Kafka's own expected outputs (AdminRackAwareTest, AdminZkClientTest)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import pytest

from kafkad.controller.assignment import (
    assign_new_partitions,
    assign_replicas,
    rack_alternated,
    validate_assignment,
)
from kafkad.protocol.errors import ErrorCode, KafkaError

RACKS = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}


def test_rack_alternated_list_as_kafka() -> None:
    assert rack_alternated(RACKS) == [0, 3, 1, 5, 4, 2]
    assert rack_alternated({b: r for b, r in RACKS.items() if b != 5}) == [0, 3, 1, 4, 2]


@pytest.mark.parametrize(
    ("brokers", "start_partition_id", "expected"),
    [
        pytest.param(
            RACKS,
            0,
            [[0, 3, 1], [3, 1, 5], [1, 5, 4], [5, 4, 2], [4, 2, 0], [2, 0, 3], [0, 4, 2]],
            id="rack-aware",
        ),
        pytest.param(
            dict.fromkeys(range(5)),
            -1,
            [
                [0, 1, 2],
                [1, 2, 3],
                [2, 3, 4],
                [3, 4, 0],
                [4, 0, 1],
                [0, 2, 3],
                [1, 3, 4],
                [2, 4, 0],
                [3, 0, 1],
                [4, 1, 2],
            ],
            id="rack-unaware",
        ),
    ],
)
def test_assignment_as_kafka(
    brokers: dict[int, str | None], start_partition_id: int, expected: list[list[int]]
) -> None:
    got = assign_replicas(
        brokers, len(expected), 3, fixed_start_index=0, start_partition_id=start_partition_id
    )
    assert got == dict(enumerate(expected))


@pytest.mark.parametrize("seed", range(6))
def test_every_partition_spans_all_racks_and_leaders_balance(seed: int) -> None:
    racks = {0: "a", 1: "a", 2: "b", 3: "b", 4: "c", 5: "c"}
    got = assign_replicas(racks, 12, 3, rand=lambda n: (seed * 7) % n)
    assert all(len({racks[b] for b in reps}) == 3 and len(set(reps)) == 3 for reps in got.values())
    assert set(Counter(reps[0] for reps in got.values()).values()) == {2}  # 12 leaders over 6 brokers


@pytest.mark.parametrize(
    ("call", "code"),
    [
        (lambda: assign_replicas({1: None, 2: None}, 3, 3), ErrorCode.INVALID_REPLICATION_FACTOR),
        (lambda: assign_replicas({1: "a", 2: None}, 3, 2), ErrorCode.INVALID_REPLICATION_FACTOR),
        (lambda: assign_replicas({1: None}, 0, 1), ErrorCode.INVALID_PARTITIONS),
        (lambda: validate_assignment({0: [1, 1]}, {1: None}), ErrorCode.INVALID_REPLICA_ASSIGNMENT),
        (lambda: validate_assignment({0: [1, 9]}, {1: None, 2: None}), None),
        (lambda: validate_assignment({0: [1], 1: [1, 2]}, {1: None, 2: None}), None),
    ],
)
def test_errors(call: Callable[[], object], code: ErrorCode | None) -> None:
    with pytest.raises(KafkaError) as e:
        call()
    assert code is None or e.value.code == code


def test_a_valid_assignment_may_start_past_partition_zero() -> None:
    validate_assignment({3: [1, 2]}, {1: None, 2: None}, first_partition=3)


def test_new_partitions_continue_the_round_robin() -> None:
    brokers = dict.fromkeys(range(3))
    existing = assign_replicas(brokers, 3, 2, fixed_start_index=0)
    added = assign_new_partitions(brokers, existing, 6)
    assert sorted(added) == [3, 4, 5]
    assert all(len(set(r)) == 2 for r in added.values())
    assert Counter(r[0] for r in added.values()) == Counter({0: 1, 1: 1, 2: 1})
