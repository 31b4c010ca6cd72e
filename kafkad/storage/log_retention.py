"""Retention of a PartitionLog's segments and their delayed deletion (Kafka `UnifiedLog.deleteOldSegments`).

Retention deletes a prefix of closed segments: those wholly below the high watermark that are below
the log start, older than retention.ms, or in excess of retention.bytes. A broker-wide disk budget
(LogManager) deletes the oldest closed segments of any log through `PartitionLog.delete_oldest_segment`.

Deleted segments (retention, DeleteRecords, truncation) are renamed `*.deleted` and their fds stay open
for file.delete.delay.ms (Kafka's delay): a fetch response may still be sendfile-ing from them, and
closing an fd the writer holds could even make it send another file that reused the number.
`DelayedDeletions` holds them until `PartitionLog.reap_deleted()` closes and unlinks them once the
delay passed.

Runs on the event loop and never blocks (the blocking close/unlink is the caller's).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkad.clock import Clock
from kafkad.storage.log_types import SegmentInfo
from kafkad.storage.segment import LogSegment

if TYPE_CHECKING:
    from kafkad.storage.partition_log import PartitionLog

__all__ = ["DelayedDeletions", "apply_retention", "closed_segments", "retention_candidates"]


class DelayedDeletions:
    """Segments marked deleted, each with the monotonic deadline after which it may be destroyed."""

    __slots__ = ("_clock", "_pending")

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._pending: list[tuple[int, LogSegment]] = []

    def schedule(self, seg: LogSegment, delay_ms: int) -> None:
        """Rename `seg` to `*.deleted` now; it becomes due `delay_ms` later."""
        seg.mark_deleted()
        self._pending.append((self._clock.monotonic_ms() + delay_ms, seg))

    def pop_expired(self, force: bool = False) -> list[LogSegment]:
        """Remove and return the segments whose delay passed (all with `force`)."""
        now = self._clock.monotonic_ms()
        due = [s for d, s in self._pending if force or d <= now]
        self._pending = [(d, s) for d, s in self._pending if not (force or d <= now)]
        return due

    def pop_all(self) -> list[LogSegment]:
        """Remove and return every pending segment, whatever its delay."""
        out = [s for _, s in self._pending]
        self._pending = []
        return out


def closed_segments(log: PartitionLog) -> list[SegmentInfo]:
    """Every segment but the active one, oldest first (for a broker-wide disk budget)."""
    return [
        SegmentInfo(s.base_offset, end, s.size, s.largest_timestamp()) for s, end in log.segments.closed()
    ]


def retention_candidates(log: PartitionLog, now_ms: int) -> list[SegmentInfo]:
    """The oldest closed segments that retention.ms / retention.bytes / the log start allow deleting.

    Only segments wholly below the high watermark qualify (Kafka), and only a prefix of the log.
    """
    cfg = log.config
    excess = log.size_bytes - cfg.retention_bytes if cfg.retention_bytes >= 0 and cfg.delete_enabled else -1
    high_watermark = log.high_watermark
    out: list[SegmentInfo] = []
    for info in closed_segments(log):
        if info.next_offset > high_watermark:
            break
        by_start = info.next_offset <= log.log_start_offset
        by_time = (
            cfg.delete_enabled
            and cfg.retention_ms >= 0
            and now_ms - info.largest_timestamp_ms > cfg.retention_ms
        )
        by_size = excess >= info.size_bytes
        if not (by_start or by_time or by_size):
            break
        excess -= info.size_bytes
        out.append(info)
    return out


def apply_retention(log: PartitionLog, now_ms: int) -> int:
    """Delete every retention candidate; rolls an expired active segment first. Returns the count."""
    cfg = log.config
    active = log.active_segment
    if (
        cfg.delete_enabled
        and cfg.retention_ms >= 0
        and active.size
        and now_ms - active.largest_timestamp() > cfg.retention_ms
        and log.high_watermark >= log.log_end_offset
        and all(now_ms - s.largest_timestamp_ms > cfg.retention_ms for s in closed_segments(log))
    ):
        log.roll()
    count = 0
    for _ in retention_candidates(log, now_ms):
        log.delete_oldest_segment()  # candidates are closed segments: the active one stays
        count += 1
    return count
