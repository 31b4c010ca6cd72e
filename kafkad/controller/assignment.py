"""Replica assignment as Kafka's AdminUtils.assignReplicasToBrokers (rack-unaware and rack-aware).

Goals (Kafka's): spread replicas evenly over brokers; give each broker an even share of leaders (first
replicas); with racks, put each partition's replicas on as many racks as possible, by walking a broker list
that alternates racks. Pure functions; `rand` is injectable so tests pin the start index and shift.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Mapping, Sequence

from kafkad.protocol.errors import ErrorCode, KafkaError
from kafkad.protocol.topic_rules import check_partition_count


def _replica_index(first: int, shift: int, j: int, n: int) -> int:
    return (first + 1 + (shift + j) % (n - 1)) % n


def rack_alternated(racks: Mapping[int, str]) -> list[int]:
    """Kafka's getRackAlternatedBrokerList: one broker of each rack (racks sorted) in turn."""
    by_rack: dict[str, list[int]] = {}
    for b in sorted(racks):
        by_rack.setdefault(racks[b], []).append(b)
    names = sorted(by_rack)
    out: list[int] = []
    i = 0
    while len(out) < len(racks):
        lst = by_rack[names[i % len(names)]]
        pos = i // len(names)
        if pos < len(lst):
            out.append(lst[pos])
        i += 1
    return out


def assign_replicas(
    brokers: Mapping[int, str | None],
    num_partitions: int,
    replication_factor: int,
    *,
    fixed_start_index: int = -1,
    start_partition_id: int = -1,
    rand: Callable[[int], int] | None = None,
) -> dict[int, list[int]]:
    """partition -> replicas. `brokers` maps live broker id -> rack (None when unset). Raises KafkaError."""
    check_partition_count(num_partitions)
    if replication_factor <= 0:
        raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0.")
    if replication_factor > len(brokers):
        raise KafkaError(
            ErrorCode.INVALID_REPLICATION_FACTOR,
            f"Replication factor: {replication_factor} larger than available brokers: {len(brokers)}.",
        )
    pick = rand or (lambda n: random.randrange(n))
    with_rack = {b: r for b, r in brokers.items() if r is not None}
    if not with_rack:
        return _unaware(
            sorted(brokers), num_partitions, replication_factor, fixed_start_index, start_partition_id, pick
        )
    if len(with_rack) != len(brokers):
        raise KafkaError(
            ErrorCode.INVALID_REPLICATION_FACTOR,
            "Not all brokers have rack information for replica rack aware assignment.",
        )
    return _rack_aware(
        with_rack, num_partitions, replication_factor, fixed_start_index, start_partition_id, pick
    )


def _unaware(
    ids: Sequence[int], n_parts: int, rf: int, fixed: int, start_pid: int, pick: Callable[[int], int]
) -> dict[int, list[int]]:
    n = len(ids)
    return {
        pid: [ids[first]] + [ids[_replica_index(first, shift, j, n)] for j in range(rf - 1)]
        for pid, first, shift in _walk(n, n_parts, fixed, start_pid, pick)
    }


def _walk(
    n: int, n_parts: int, fixed: int, start_pid: int, pick: Callable[[int], int]
) -> Iterator[tuple[int, int, int]]:
    """(partition, index of its first replica, replica shift) as Kafka walks them: the start index and
    the shift are random (or fixed), and the shift grows by one after every full round over the brokers."""
    start = fixed if fixed >= 0 else pick(n)
    shift = fixed if fixed >= 0 else pick(n)
    for pid in range(max(0, start_pid), max(0, start_pid) + n_parts):
        if pid > 0 and pid % n == 0:
            shift += 1
        yield pid, (pid + start) % n, shift


def _rack_aware(
    racks: Mapping[int, str], n_parts: int, rf: int, fixed: int, start_pid: int, pick: Callable[[int], int]
) -> dict[int, list[int]]:
    arranged = rack_alternated(racks)
    n = len(arranged)
    num_racks = len(set(racks.values()))
    out: dict[int, list[int]] = {}
    for pid, first, shift in _walk(n, n_parts, fixed, start_pid, pick):
        leader = arranged[first]
        reps = [leader]
        used_racks = {racks[leader]}
        used = {leader}
        k = 0
        for _ in range(rf - 1):
            while True:
                b = arranged[_replica_index(first, shift * num_racks, k, n)]
                k += 1
                rack = racks[b]
                if (rack not in used_racks or len(used_racks) == num_racks) and (
                    b not in used or len(used) == n
                ):
                    reps.append(b)
                    used_racks.add(rack)
                    used.add(b)
                    break
        out[pid] = reps
    return out


def assign_new_partitions(
    brokers: Mapping[int, str | None],
    existing: Mapping[int, Sequence[int]],
    new_total: int,
    rand: Callable[[int], int] | None = None,
) -> dict[int, list[int]]:
    """CreatePartitions without an explicit assignment (Kafka's AdminZkClient.createPartitions)."""
    rf = len(existing[0]) if 0 in existing else len(next(iter(existing.values())))
    ids = sorted(brokers)
    first = existing[0][0] if 0 in existing else ids[0]
    start = next((i for i, b in enumerate(ids) if b >= first), 0)
    return assign_replicas(
        brokers,
        new_total - len(existing),
        rf,
        fixed_start_index=start,
        start_partition_id=len(existing),
        rand=rand,
    )


def validate_assignment(
    assignment: Mapping[int, Sequence[int]], live: Mapping[int, object], *, first_partition: int = 0
) -> None:
    """An explicit assignment: partitions first_partition.. contiguous, no duplicate replicas, equal RF, known brokers."""
    if not assignment:
        raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Replica assignment is empty.")
    expected = list(range(first_partition, first_partition + len(assignment)))
    if sorted(assignment) != expected:
        raise KafkaError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Partitions must be consecutive from the first."
        )
    rfs = {len(r) for r in assignment.values()}
    if len(rfs) != 1 or 0 in rfs:
        raise KafkaError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT, "All partitions should have the same number of replicas."
        )
    for p, reps in assignment.items():
        if len(set(reps)) != len(reps):
            raise KafkaError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"Duplicate replica assignment for partition {p}: {list(reps)}.",
            )
        unknown = [b for b in reps if b not in live]
        if unknown:
            raise KafkaError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"Unknown broker(s) {unknown} in replica assignment."
            )
