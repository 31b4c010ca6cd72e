"""Group commit: fsync partition logs on a thread, and let appends wait until their offsets are on disk.

Kafka's `flush.messages` / `flush.ms` (broker defaults `log.flush.interval.messages` / `.ms`) ask that the
append that brings a partition's unflushed messages (or their age) to the limit is fsynced before it is
answered: a Produce on the leader, the next Fetch on a follower. Doing one fsync per request would cap a
partition at one request per disk flush; instead `LogSync` does what databases call group commit:

- `request(plog, offset)` says "offsets below `offset` of this log must be on disk" and returns a future
  that completes once `plog.recovery_point >= offset` (None when it already is); `schedule(plog)` asks
  the same up to the log end with nobody waiting (the periodic flush pass, acks=0 produces).
- Logs are grouped by disk (the filesystem of their log dir: log dirs on one device share a group). Per
  disk at most ONE sync job runs at a time, on an executor thread: it walks every log that asked since
  the previous job started and calls `PartitionLog.flush()` on each (one fdatasync per segment written
  to, the indexes, the directory when a segment was created), which fsyncs up to the log end it reads
  *on the thread*, so everything appended while the previous job ran, by any number of requests, is
  covered by the one new fsync.
- The daemon lowers the GIL switch interval (service/main.py): the job's thread must take the GIL back
  from the busy loop thread after each syscall, which took up to 5 ms per syscall at Python's default.
- When the job ends (back on the loop) `on_synced(plog)` hears of every log whose recovery point moved
  (the partition's HW may have waited for it), then every waiter whose offset the new recovery point
  covers completes; a log that got more requests meanwhile is in the next job, started at once.

The recovery point only moves in `PartitionLog.flush`, after its fsyncs returned (and never past a
truncation that raced them), so it never covers data that was not fsynced; the recovery-point checkpoint
written from it is therefore a safe place for recovery to trust.

Errors: an fsync that fails (LogIOError) fails every waiter of that log with the error and calls
`on_error(plog, exc)` once (the daemon takes the partition offline, as for any other I/O error: the page
cache may have dropped the pages, so a retry could "succeed" over lost data). A waiter whose offset was
truncated away before it was synced (a leader that became follower) fails with NOT_LEADER_OR_FOLLOWER.

Concurrency contract: every method runs on the event loop (futures, bookkeeping); only the job body
(`_sync_logs`) runs on the executor, and it touches nothing of this object but its argument and results.
`PartitionLog.flush` is safe on a thread while the loop appends (see partition_log). All flushes of a
broker's logs go through one LogSync (the periodic flush pass too, with `schedule`), so two threads
never flush one log at once. Logs not asking for flushes never enter this module: the default (no flush
settings) Produce path only tests `LogConfig.sync_on_append` (in Partition.append_as_leader and the handler).
"""

from __future__ import annotations

import asyncio
import logging
import os
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kafkad.protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from kafkad.storage.partition_log import PartitionLog

log = logging.getLogger(__name__)

__all__ = ["LogSync", "SyncStats"]

# (log, its recovery point before, after, the error or None): one per log a job walked.
_Result = tuple["PartitionLog", int, int, Exception | None]
ErrorHook = Callable[["PartitionLog", Exception], object]
SyncedHook = Callable[["PartitionLog"], object]
Flush = Callable[["PartitionLog"], int]


@dataclass(slots=True)
class SyncStats:
    """Counters since start (exported as metrics): jobs run, log flushes that fsynced something, and
    the messages those flushes made durable (records per fsync = records / fsyncs)."""

    jobs: int = 0
    fsyncs: int = 0
    records: int = 0
    failures: int = 0


@dataclass(slots=True)
class _Disk:
    """The logs of one log dir: those waiting for the next job (insertion-ordered) and the job running."""

    pending: dict[PartitionLog, None] = field(default_factory=dict)
    waiters: dict[PartitionLog, list[tuple[int, asyncio.Future[None]]]] = field(default_factory=dict)
    job: asyncio.Future[list[_Result]] | None = None


def _flush(plog: PartitionLog) -> int:
    return plog.flush()


def _fail_future(fut: asyncio.Future[None], exc: BaseException) -> None:
    """Fail a waiter; marked retrieved, since its request may be gone (a closed connection) and asyncio
    would log "exception was never retrieved" as an ERROR."""
    fut.set_exception(exc)
    fut.exception()


def _sync_logs(logs: Sequence[PartitionLog], flush: Flush) -> list[_Result]:
    """Blocking (the job body, on the executor): flush each log; an error stays with its log."""
    out: list[_Result] = []
    for plog in logs:
        before = plog.recovery_point
        try:
            out.append((plog, before, flush(plog), None))
        except Exception as exc:  # LogIOError mostly; any error must reach the waiters, not the executor
            out.append((plog, before, before, exc))
    return out


class LogSync:
    """Group commit over a broker's partition logs (module docstring). Runs on the event loop."""

    def __init__(
        self,
        *,
        on_error: ErrorHook | None = None,
        on_synced: SyncedHook | None = None,
        flush: Flush = _flush,
    ) -> None:
        self.on_error = on_error
        self.on_synced = on_synced
        self._flush = flush
        self._disks: dict[object, _Disk] = {}
        self._disk_of: weakref.WeakKeyDictionary[PartitionLog, _Disk] = weakref.WeakKeyDictionary()
        self.stats = SyncStats()
        self._closed = False

    def request(self, plog: PartitionLog, offset: int) -> asyncio.Future[None] | None:
        """Have `plog` fsynced up to `offset` (exclusive). Returns a future done when the recovery point
        covers it (failed with the fsync's error, see the module docstring), or None if it already does."""
        if plog.recovery_point >= offset:
            return None
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if self._closed:
            _fail_future(fut, KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, "the broker is shutting down"))
            return fut
        disk = self._disk(plog)
        disk.waiters.setdefault(plog, []).append((offset, fut))
        disk.pending[plog] = None
        if disk.job is None:
            self._start(disk)
        return fut

    def schedule(self, plog: PartitionLog) -> None:
        """Have `plog` fsynced up to its log end, nobody waiting (the periodic pass, acks=0)."""
        if self._closed or plog.recovery_point >= plog.log_end_offset:
            return
        disk = self._disk(plog)
        disk.pending[plog] = None
        if disk.job is None:
            self._start(disk)

    def _disk(self, plog: PartitionLog) -> _Disk:
        """The group of `plog`'s filesystem (st_dev of its log dir, looked up once per log)."""
        disk = self._disk_of.get(plog)
        if disk is None:
            try:
                key: object = os.stat(plog.directory.parent).st_dev
            except OSError:  # the fsync will report what is wrong with it
                key = str(plog.directory.parent)
            disk = self._disks.get(key)
            if disk is None:
                disk = self._disks[key] = _Disk()
            self._disk_of[plog] = disk
        return disk

    @property
    def busy(self) -> bool:
        """Whether a sync job runs (tests, shutdown)."""
        return any(d.job is not None for d in self._disks.values())

    async def close(self) -> None:
        """Refuse new requests and wait for the jobs running (before the logs close at shutdown)."""
        self._closed = True
        jobs = [d.job for d in self._disks.values() if d.job is not None]
        if jobs:
            await asyncio.gather(*jobs, return_exceptions=True)

    def _start(self, disk: _Disk) -> None:
        logs = list(disk.pending)
        disk.pending.clear()
        job = asyncio.get_running_loop().run_in_executor(None, _sync_logs, logs, self._flush)
        disk.job = job
        job.add_done_callback(lambda done: self._finished(disk, logs, done))

    def _finished(self, disk: _Disk, logs: list[PartitionLog], job: asyncio.Future[list[_Result]]) -> None:
        disk.job = None
        stats = self.stats
        stats.jobs += 1
        if job.cancelled() or job.exception() is not None:  # the executor, not a log: try them again
            log.warning(
                "log sync job failed (%s); retrying", "cancelled" if job.cancelled() else job.exception()
            )
            disk.pending.update(dict.fromkeys(logs))
            results = []
        else:
            results = job.result()
        for plog, before, after, exc in results:
            if exc is not None:
                stats.failures += 1
                self._fail(disk, plog, exc)
                continue
            if after > before:
                stats.fsyncs += 1
                stats.records += after - before
                if self.on_synced is not None:
                    self.on_synced(plog)
            self._complete(disk, plog)
        if disk.pending and not self._closed:
            self._start(disk)

    def _complete(self, disk: _Disk, plog: PartitionLog) -> None:
        waiters = disk.waiters.pop(plog, None)
        if not waiters:
            return
        synced, end = plog.recovery_point, plog.log_end_offset
        keep = []
        for offset, fut in waiters:
            if fut.done():
                continue
            if offset <= synced:
                fut.set_result(None)
            elif offset > end:  # truncated away before it was synced (leadership moved)
                _fail_future(
                    fut,
                    KafkaError(
                        ErrorCode.NOT_LEADER_OR_FOLLOWER,
                        f"{plog.topic}-{plog.partition}: truncated to {end} before offset {offset} was synced",
                    ),
                )
            else:  # appended after the job read the log end: the next job covers it
                keep.append((offset, fut))
        if keep:
            disk.waiters[plog] = keep
            disk.pending[plog] = None

    def _fail(self, disk: _Disk, plog: PartitionLog, exc: Exception) -> None:
        disk.pending.pop(plog, None)
        for _, fut in disk.waiters.pop(plog, ()):
            if not fut.done():
                _fail_future(fut, exc)
        if self.on_error is not None:
            self.on_error(plog, exc)
