"""Broker-wide disk budget: what to delete when `log.dirs` outgrow their allowance (Kafka has no such thing).

Two limits, either may be off:
* `log.dirs.max.bytes`: the bytes of all partition logs together;
* `log.dirs.min.free.percent`: free space each log dir's filesystem must keep (dirs on one filesystem
  share it: they are grouped by device).

`plan_budget` is pure and loop-safe: from the measured usage and the closed segments of every partition
it picks what to delete. Oldest first across partitions (by the segment's max timestamp), but always a
prefix of each partition (a log cannot lose a middle segment), and first among segments the Spark
bridge has shipped; unshipped ones are taken only when shipped ones are not enough (the caller logs a
WARNING for each). What is still missing after every closed segment is gone is the shortfall: the
LogManager then blocks writes (`BudgetState.check_writable` raises KAFKA_STORAGE_ERROR) until a later
pass finds the budget met again. Reads are never blocked.
"""

from __future__ import annotations

import heapq
import math
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from kafkad.protocol.errors import ErrorCode, KafkaError


@dataclass(frozen=True, slots=True)
class DiskUsage:
    """One log dir's filesystem: its device (dirs with the same device share space), total and free bytes."""

    device: int
    total_bytes: int
    free_bytes: int


UsageProbe = Callable[[str], DiskUsage]
ShippedCheck = Callable[[str, int, int], bool]  # (topic, partition, base_offset) -> shipped?


def statvfs_usage(path: str) -> DiskUsage:
    """The real probe: statvfs for sizes (free = space available to unprivileged users), stat for device."""
    st = os.statvfs(path)
    return DiskUsage(
        device=os.stat(path).st_dev,
        total_bytes=st.f_blocks * st.f_frsize,
        free_bytes=st.f_bavail * st.f_frsize,
    )


def everything_shipped(topic: str, partition: int, base_offset: int) -> bool:
    """Default when no Spark bridge runs: no segment is held back."""
    return True


@dataclass(frozen=True, slots=True)
class SegmentCandidate:
    """A closed (non-active) segment that could be deleted."""

    log_dir: str
    topic: str
    partition: int
    base_offset: int
    size_bytes: int
    max_timestamp_ms: int


@dataclass(frozen=True, slots=True)
class BudgetPlan:
    deletions: tuple[SegmentCandidate, ...]  # in the order chosen
    unshipped: tuple[SegmentCandidate, ...]  # the subset of deletions not yet shipped (last resort)
    shortfall_bytes: int  # > 0: even deleting all of `deletions` leaves the budget exceeded

    def delete_before(self) -> dict[tuple[str, int], int]:
        """Per partition: the base offset of the newest segment to delete (delete it and all older ones)."""
        out: dict[tuple[str, int], int] = {}
        for c in self.deletions:
            key = (c.topic, c.partition)
            out[key] = max(out.get(key, -1), c.base_offset)
        return out


def plan_budget(
    *,
    used_bytes_by_dir: Mapping[str, int],
    usage_by_dir: Mapping[str, DiskUsage],
    max_bytes: int,
    min_free_percent: float,
    candidates: Iterable[SegmentCandidate],
    is_shipped: ShippedCheck = everything_shipped,
) -> BudgetPlan:
    """Loop-safe, pure: choose the segments to delete so both limits hold again (see the module doc)."""
    global_need = sum(used_bytes_by_dir.values()) - max_bytes if max_bytes > 0 else 0
    device_need: dict[int, int] = {}
    dir_device: dict[str, int] = {}
    for d, u in usage_by_dir.items():
        dir_device[d] = u.device
        if min_free_percent > 0:
            device_need[u.device] = math.ceil(u.total_bytes * min_free_percent / 100.0) - u.free_bytes

    def shortfall() -> int:
        return max(0, global_need, *device_need.values())

    if shortfall() == 0:
        return BudgetPlan((), (), 0)

    # Each partition's closed segments, oldest (lowest base offset) first; only a prefix may go.
    queues: dict[tuple[str, int], list[SegmentCandidate]] = {}
    for c in candidates:
        queues.setdefault((c.topic, c.partition), []).append(c)
    for q in queues.values():
        q.sort(key=lambda c: c.base_offset, reverse=True)  # pop() from the end = oldest

    chosen: list[SegmentCandidate] = []
    unshipped: list[SegmentCandidate] = []
    for last_resort in (False, True):
        heap = [(_age_key(q[-1]), key) for key, q in queues.items() if q]
        heapq.heapify(heap)
        while heap and shortfall() > 0:
            _, key = heapq.heappop(heap)
            q = queues[key]
            head = q[-1]
            shipped = is_shipped(head.topic, head.partition, head.base_offset)
            if not shipped and not last_resort:
                continue  # this partition's prefix stops here in the first round
            dev = dir_device.get(head.log_dir)
            useful = global_need > 0 or (dev is not None and device_need.get(dev, 0) > 0)
            if not useful:
                continue  # its filesystem is fine; deleting it would not help the limit that is short
            q.pop()
            chosen.append(head)
            if not shipped:
                unshipped.append(head)
            global_need -= head.size_bytes
            if dev is not None and dev in device_need:
                device_need[dev] -= head.size_bytes
            if q:
                heapq.heappush(heap, (_age_key(q[-1]), key))
    return BudgetPlan(tuple(chosen), tuple(unshipped), shortfall())


def _age_key(c: SegmentCandidate) -> tuple[int, str, int, int]:
    return (c.max_timestamp_ms, c.topic, c.partition, c.base_offset)


class BudgetState:
    """Whether writes are allowed; flipped by the budget pass, read by the produce path (loop-safe, cheap)."""

    __slots__ = ("_reason", "writes_blocked")

    def __init__(self) -> None:
        self.writes_blocked = False
        self._reason = ""

    def block(self, reason: str) -> None:
        self.writes_blocked = True
        self._reason = reason

    def unblock(self) -> None:
        self.writes_blocked = False
        self._reason = ""

    def check_writable(self) -> None:
        if self.writes_blocked:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"writes blocked: {self._reason}")
