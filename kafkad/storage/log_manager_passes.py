"""LogManager's periodic passes and deferred deletion (the `LogManagerPasses` base of LogManager).

Periodic work has no threads or timers of its own: the daemon calls the passes. Each pass DECIDES on
the event loop (cheap, in memory: `retention_pass`, `budget_pass`, `flush_pass`) and leaves the slow
part (fsync, closing files and unlinking) to a blocking method the daemon runs in an executor:
`flush_pass` -> `flush_logs`, `collect_deletions` -> `run_deletions`. Deleted segments and topic dirs
keep their files and fds for file.delete.delay.ms (monotonic clock), so a response being sendfile'd
from them still reads valid bytes; `collect_deletions` hands out what is due. Bytes deleted but not yet
unlinked count as free space for the disk budget. The passes see the logs only through LogManager's
public read-only accessors (`partition_logs`, `logs`, `get`), never its dict of logs.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from kafkad.clock import Clock
from kafkad.storage.disk_budget import (
    BudgetPlan,
    BudgetState,
    DiskUsage,
    SegmentCandidate,
    ShippedCheck,
    UsageProbe,
    WriteGate,
    everything_shipped,
    headroom_of,
    plan_budget,
)
from kafkad.storage.log_dir_layout import TopicPartition
from kafkad.storage.log_manager_config import LogManagerConfig
from kafkad.storage.log_offline import LogIOError, attempt, is_transient
from kafkad.storage.partition_log import PartitionLog

# The messages keep the log manager's logger name (operators filter on it).
log = logging.getLogger("kafkad.storage.log_manager")

__all__ = ["Deletion", "LogManagerPasses"]


@dataclass(slots=True)
class _Pending:
    """A deleted topic dir waiting for file.delete.delay.ms (monotonic deadline)."""

    due_ms: int
    action: Callable[[], None]


@dataclass(slots=True)
class _Freed:
    """Bytes already deleted but not yet unlinked: the disk budget counts them as free."""

    due_ms: int
    log_dir: str
    size_bytes: int


Deletion = Callable[[], None]
# recovery_flush_pass: unflushed bytes below which a log is left to a later pass (or the next roll):
# 1,000 such logs are 256 MiB to CRC-check after a crash (~0.1 s), not 3,000 fsyncs per pass.
RECOVERY_FLUSH_MIN_BYTES = 256 << 10


class LogManagerPasses:
    """Retention, disk budget, flush and deletion passes over LogManager's logs (state set by LogManager)."""

    config: LogManagerConfig
    budget: BudgetState
    write_gate: WriteGate
    retention_held_segments: int
    unshipped_deleted_total: int
    _clock: Clock
    _probe: UsageProbe
    _is_shipped: ShippedCheck
    _dirs: list[str]
    _dir_of: dict[TopicPartition, str]
    _pending: list[_Pending]
    _freed: list[_Freed]
    _lock: threading.Lock
    # recovery_flush_pass: (active segment base, its size) when each log was last handed out
    _recovery_flush_marks: weakref.WeakKeyDictionary[PartitionLog, tuple[int, int]]

    # ---- LogManager's read-only view of its logs (defined there) ---------------------------------

    def partition_logs(self) -> list[tuple[TopicPartition, PartitionLog]]:
        raise NotImplementedError

    def logs(self) -> Iterator[PartitionLog]:
        raise NotImplementedError

    def get(self, topic: str, partition: int) -> PartitionLog | None:
        raise NotImplementedError

    # ---- periodic passes (decide on the loop) ---------------------------------------------------

    def retention_pass(self, now_ms: int) -> int:
        """Loop-safe: apply retention.ms / retention.bytes / the log start offset to every log.

        Whole segments only, oldest first, never data above the high watermark (PartitionLog's rules).
        With an `is_shipped` check (the Spark bridge runs), an unshipped segment and all newer ones are
        kept: only the disk budget may delete unshipped data.
        Their files go after file.delete.delay.ms via `collect_deletions`. Returns segments deleted.
        """
        deleted = 0
        held = 0
        gated = self._is_shipped is not everything_shipped
        for tp, plog in self.partition_logs():
            before = plog.size_bytes
            try:
                if gated:
                    n, kept = self._retain_shipped(tp, plog, now_ms)
                    held += kept
                else:
                    n = plog.apply_retention(now_ms)
            except (OSError, LogIOError) as exc:  # this partition's disk: the others' retention goes on
                self._storage_failed(tp, exc)
                continue
            if n:
                deleted += n
                self._note_freed(tp, plog, before - plog.size_bytes)
        self.retention_held_segments = held
        return deleted

    def _retain_shipped(self, tp: TopicPartition, plog: PartitionLog, now_ms: int) -> tuple[int, int]:
        """Retention with the Spark bridge on: the first unshipped segment stops the deletable prefix.

        Returns (deleted, held back). When every candidate and the active segment count as shipped
        (a topic the bridge does not ship) the log's own rule runs, including its roll of an expired
        active segment; otherwise no roll here (the bridge rolls old active segments itself).
        """
        topic, p = tp
        candidates = plog.retention_candidates(now_ms)
        shipped = [self._is_shipped(topic, p, c.base_offset) for c in candidates]
        if all(shipped) and self._is_shipped(topic, p, plog.active_segment.base_offset):
            return plog.apply_retention(now_ms), 0
        deleted = 0
        for ok in shipped:
            if not ok or plog.delete_oldest_segment() is None:
                break
            deleted += 1
        return deleted, len(candidates) - deleted

    def budget_pass(self, now_ms: int) -> BudgetPlan:
        """Loop-safe (statvfs per log dir): enforce the broker-wide disk budget, block or unblock writes."""
        cfg = self.config
        if cfg.log_dirs_max_bytes < 0 and cfg.log_dirs_min_free_percent <= 0:
            self.budget.unblock()
            self.budget.reserve_bytes = 0
            self.write_gate.reset(0)
            return BudgetPlan((), (), 0)
        used = self._used_by_dir()
        usage = self._usage()
        reserve = self.budget.reserve_bytes
        plan = plan_budget(
            used_bytes_by_dir=used,
            usage_by_dir=usage,
            max_bytes=cfg.log_dirs_max_bytes,
            min_free_percent=cfg.log_dirs_min_free_percent,
            candidates=self._candidates(),
            is_shipped=self._is_shipped,
            reserve_bytes=reserve,
        )
        self.unshipped_deleted_total += len(plan.unshipped)
        for c in plan.unshipped:
            log.warning(
                "DISK BUDGET: deleting segment %s-%d base offset %d (%d bytes) that the Spark bridge has NOT "
                "shipped yet: no shipped segment is left to free space",
                c.topic,
                c.partition,
                c.base_offset,
                c.size_bytes,
            )
        for (topic, p), upto in plan.delete_before().items():
            target = self.get(topic, p)
            if target is None:
                continue
            freed = 0
            try:
                for seg in list(target.closed_segments()):
                    if seg.base_offset > upto or target.delete_oldest_segment() is None:
                        break
                    freed += seg.size_bytes
            except (OSError, LogIOError) as exc:
                self._storage_failed((topic, p), exc)
            self._note_freed((topic, p), target, freed)
        if plan.deletions:
            log.info("disk budget: deleted %d segments", len(plan.deletions))
        if plan.shortfall_bytes > 0:
            if not self.budget.writes_blocked:
                log.error(
                    "disk budget exceeded by %d bytes (%d of them room for a refused write) with no closed "
                    "segment left: blocking writes",
                    plan.shortfall_bytes,
                    min(reserve, plan.shortfall_bytes),
                )
            self.budget.block(f"log dirs over their disk budget by {plan.shortfall_bytes} bytes")
        else:
            self.budget.reserve_bytes = 0  # the refused write fits now
            if self.budget.writes_blocked:
                log.warning("disk budget met again: writes resume")
                self.budget.unblock()
        self.write_gate.reset(0)  # segments may have gone, limits may have changed: measure afresh
        return plan

    def headroom(self) -> int:
        """Loop-safe (statvfs per log dir): bytes that may be appended before the disk budget is crossed
        (the `WriteGate`'s measurement)."""
        cfg = self.config
        used = sum(self._used_by_dir().values()) if cfg.log_dirs_max_bytes > 0 else 0
        return headroom_of(
            usage_by_dir=self._usage(),
            used_bytes=used,
            max_bytes=cfg.log_dirs_max_bytes,
            min_free_percent=cfg.log_dirs_min_free_percent,
        )

    def _used_by_dir(self) -> dict[str, int]:
        used: dict[str, int] = dict.fromkeys(self._dirs, 0)
        for tp, plog in self.partition_logs():
            used[self._dir_of[tp]] += plog.size_bytes
        return used

    def _usage(self) -> dict[str, DiskUsage]:
        """statvfs of each log dir (none without a min-free limit); files already waiting for deletion
        will be freed, so they count as free space."""
        if self.config.log_dirs_min_free_percent <= 0:
            return {}
        usage = {d: self._probe(d) for d in self._dirs}
        pending_by_dev: dict[int, int] = {}
        with self._lock:
            for item in self._freed:
                dev = usage[item.log_dir].device
                pending_by_dev[dev] = pending_by_dev.get(dev, 0) + item.size_bytes
        return {
            d: DiskUsage(u.device, u.total_bytes, u.free_bytes + pending_by_dev.get(u.device, 0))
            for d, u in usage.items()
        }

    def _storage_failed(self, tp: TopicPartition, exc: Exception) -> None:
        """A pass hit an I/O error on one partition: offline unless the disk is only full."""
        if is_transient(exc):
            log.warning("%s-%d: %s (retried at the next pass)", tp[0], tp[1], exc)
        else:
            self.take_offline(tp[0], tp[1], exc)

    def take_offline(self, topic: str, partition: int, exc: BaseException) -> object:
        raise NotImplementedError

    def _candidates(self) -> Iterator[SegmentCandidate]:
        for (topic, p), plog in self.partition_logs():
            d = self._dir_of[(topic, p)]
            for seg in plog.closed_segments():
                yield SegmentCandidate(d, topic, p, seg.base_offset, seg.size_bytes, seg.largest_timestamp_ms)

    def _note_freed(self, tp: TopicPartition, plog: PartitionLog, size: int) -> None:
        if size > 0:
            due = self._clock.monotonic_ms() + plog.config.file_delete_delay_ms
            with self._lock:
                self._freed.append(_Freed(due, self._dir_of[tp], size))

    def flush_pass(self, now_ms: int) -> list[PartitionLog]:
        """Loop-safe: the logs due a flush (flush.messages, flush.ms, a roll); run `flush_logs` on them."""
        return [plog for plog in self.logs() if plog.flush_due()]

    def recovery_flush_pass(self, now_monotonic_ms: int) -> list[PartitionLog]:
        """Loop-safe: the logs whose unflushed data the background flusher should fsync now.

        log.recovery.point.flush.ms (kafkad): a log whose last flush is at least that old, with at least
        RECOVERY_FLUSH_MIN_BYTES appended to its active segment since this pass last handed it out (an
        estimate that errs towards flushing: a flush by other means is not seen). Flushing them (through the daemon's LogSync, answers never wait for it) moves their
        recovery points, and the checkpoint written after it bounds what a crash has to CRC-check.
        """
        age = self.config.recovery_point_flush_ms
        if age <= 0:
            return []
        marks = self._recovery_flush_marks
        due = []
        for plog in self.logs():
            if plog.recovery_point >= plog.log_end_offset or now_monotonic_ms - plog.last_flush_ms < age:
                continue
            # A log with only a few unflushed batches (a trickle, one record per partition from a probe)
            # costs recovery next to nothing, and fsyncing it would cost the disk 3 fsyncs per log.
            active = plog.active_segment
            base, size = marks.get(plog, (-1, 0))
            if active.size - (size if active.base_offset == base else 0) < RECOVERY_FLUSH_MIN_BYTES:
                continue
            marks[plog] = (active.base_offset, active.size)
            due.append(plog)
        return due

    def flush_logs(self, logs: Sequence[PartitionLog]) -> list[tuple[PartitionLog, Exception]]:
        """Blocking: call in executor. fsync the given logs (advances their recovery points).

        Returns the logs whose fsync failed, with the error: the caller takes them offline on the
        loop (`LogManager.take_offline`); the others are flushed all the same.
        """
        results = map(attempt(PartitionLog.flush), logs)
        return [(plog, exc) for plog, exc in results if exc is not None]

    # ---- deferred deletion ----------------------------------------------------------------------

    def _queue(self, due_ms: int, log_dir: str, size: int, action: Deletion) -> None:
        with self._lock:
            self._pending.append(_Pending(due_ms, action))
            if size > 0:
                self._freed.append(_Freed(due_ms, log_dir, size))

    def collect_deletions(self) -> list[Deletion]:
        """Loop-safe: the deletions whose file.delete.delay.ms passed; give them to `run_deletions`."""
        now = self._clock.monotonic_ms()
        out: list[Deletion] = []
        for plog in self.logs():
            out += [seg.destroy for seg in plog.pop_expired_deletions()]
        with self._lock:
            out += [p.action for p in self._pending if p.due_ms <= now]
            self._pending = [p for p in self._pending if p.due_ms > now]
            self._freed = [f for f in self._freed if f.due_ms > now]
        return out

    @staticmethod
    def run_deletions(deletions: Sequence[Deletion]) -> int:
        """Blocking: call in executor. Close and unlink; returns how many ran."""
        for action in deletions:
            try:
                action()
            except OSError:
                log.exception("deleting log files failed")
        return len(deletions)
