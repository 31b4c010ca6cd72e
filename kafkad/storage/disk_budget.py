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

The periodic pass alone lets a fast producer overrun the budget between two passes, so the append path
has a `WriteGate` too: every append charges its size against the headroom measured last (statvfs, or
the byte cap minus the logs' size); only when the charges could have used it all up is the headroom
measured again, so far from the limit that costs a subtraction per append and near it one statvfs per
request. A client write that would cross the limit is refused with the same KAFKA_STORAGE_ERROR, and
its size becomes the pass's reserve: the pass frees (or blocks writes until there is) room for it.
Replica and coordinator appends are charged but never refused.
"""

from __future__ import annotations

import heapq
import logging
import math
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from kafkad.protocol.errors import ErrorCode, KafkaError
from kafkad.storage.log_types import AppendOrigin

log = logging.getLogger("kafkad.storage.log_manager")  # operators filter the budget's lines on it


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
    reserve_bytes: int = 0,
) -> BudgetPlan:
    """Loop-safe, pure: choose the segments to delete so both limits hold again (see the module doc).

    `reserve_bytes`: room to make beyond the limits (a write the append path refused, `WriteGate`).
    """
    global_need = sum(used_bytes_by_dir.values()) + reserve_bytes - max_bytes if max_bytes > 0 else 0
    device_need: dict[int, int] = {}
    dir_device: dict[str, int] = {}
    for d, u in usage_by_dir.items():
        dir_device[d] = u.device
        if min_free_percent > 0:
            need = math.ceil(u.total_bytes * min_free_percent / 100.0) - u.free_bytes
            device_need[u.device] = need + reserve_bytes

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
    """Whether writes are allowed; flipped by the budget pass, read by the produce path (loop-safe, cheap).

    `reserve_bytes`: the largest write the append path refused since the budget was last met (the
    pass makes room for it before writes resume, so a refused producer's retry fits).
    """

    __slots__ = ("_reason", "reserve_bytes", "writes_blocked")

    def __init__(self) -> None:
        self.writes_blocked = False
        self._reason = ""
        self.reserve_bytes = 0

    def block(self, reason: str) -> None:
        self.writes_blocked = True
        self._reason = reason

    def unblock(self) -> None:
        self.writes_blocked = False
        self._reason = ""

    def check_writable(self) -> None:
        if self.writes_blocked:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"writes blocked: {self._reason}")


Headroom = Callable[[], int]  # bytes that may still be appended before a budget limit is crossed

# With both limits off the gate asks again after this many bytes (a dynamic config may turn one on).
_UNLIMITED_RECHECK = 64 << 20


class WriteGate:
    """The append path's disk-budget check (module docstring). Runs on the event loop.

    `charge(size, origin)` is called once before every append (PartitionLog.append inlines it). `headroom` measures afresh (statvfs
    of each log dir: a cheap syscall, no I/O); it runs only when the bytes charged since the last
    measurement could have used up the headroom then measured, or after `reset`.
    """

    __slots__ = ("_headroom", "_state", "remaining")

    def __init__(self, headroom: Headroom, state: BudgetState) -> None:
        self._headroom = headroom
        self._state = state
        self.remaining = 0  # measure at the first append

    def charge(self, size: int, origin: AppendOrigin) -> None:
        """Count an append of `size` bytes; KafkaError(KAFKA_STORAGE_ERROR) if a client's would cross."""
        self.remaining -= size
        if self.remaining < 0:
            self.measure(size, origin)

    def reset(self, headroom: int) -> None:
        """A fresh measurement from the budget pass (or 0: measure at the next append)."""
        self.remaining = headroom

    def measure(self, size: int, origin: AppendOrigin) -> None:
        """`charge`'s slow part, once `remaining` (already charged with `size`) went negative."""
        headroom = self._headroom()
        self.remaining = headroom - size
        if self.remaining < 0 and origin is AppendOrigin.CLIENT:
            self.remaining = headroom  # refused: nothing written
            state = self._state
            if not state.reserve_bytes:  # once until the budget is met again, not per refused request
                log.warning(
                    "disk budget: refusing writes (%d bytes would cross it, %d bytes left)",
                    size,
                    max(headroom, 0),
                )
            state.reserve_bytes = max(state.reserve_bytes, size - max(headroom, 0))
            raise KafkaError(
                ErrorCode.KAFKA_STORAGE_ERROR,
                f"writes refused: {size} bytes would take the log dirs past their disk budget "
                f"({max(headroom, 0)} bytes left)",
            )


def headroom_of(
    *,
    usage_by_dir: Mapping[str, DiskUsage],
    used_bytes: int,
    max_bytes: int,
    min_free_percent: float,
) -> int:
    """Pure: bytes that may be appended before either limit is crossed (`_UNLIMITED_RECHECK` if none is on).

    Per filesystem: free bytes above the min-free threshold; overall: the byte cap minus `used_bytes`.
    """
    out = _UNLIMITED_RECHECK
    if max_bytes > 0:
        out = max_bytes - used_bytes
    if min_free_percent > 0:
        for u in usage_by_dir.values():
            out = min(out, u.free_bytes - math.ceil(u.total_bytes * min_free_percent / 100.0))
    return out


# Logs outside a LogManager (tools, tests): a gate that never measures (2**62 bytes would take ages).
UNLIMITED_GATE = WriteGate(lambda: 1 << 62, BudgetState())
UNLIMITED_GATE.reset(1 << 62)
