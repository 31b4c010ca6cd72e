"""The log cleaner (Kafka `LogCleaner` + `LogCleanerManager`): compaction of cleanup.policy=compact logs.

Each partition log splits into a clean head [log start, first dirty) and a dirty section
[first dirty, first uncleanable), where first dirty comes from `cleaner-offset-checkpoint` (Kafka's
format, one per log dir) and first uncleanable = min(active segment base, high watermark, the first
segment younger than min.compaction.lag.ms). The active segment is never touched.

A pass (`grab_filthiest`, on the event loop, cheap) picks the log with the highest dirty ratio
dirty / (clean + dirty) above min.cleanable.dirty.ratio (or one whose max.compaction.lag.ms passed, or
whose tombstone delete horizon is due) and snapshots its closed segments. `clean` (blocking, in an
executor) builds the offset map over the dirty section (cleaner_rewrite), then rewrites every closed
segment below the mapped end group by group (segment.bytes), handing each group to `swap` — which must
run `swap_on_loop` on the event loop (the daemon marshals it; tests call it directly). The group's
files are committed with renames (cleaner_swap) and the old segments go to the log's delayed deletion,
so reads in flight keep valid fds. When every group is in, the checkpoint moves to the mapped end.
A refused swap (the log changed meanwhile) discards that group's files and ends the pass; the
checkpoint stays where it was.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from kafkad.clock import Clock
from kafkad.protocol.errors import KafkaError
from kafkad.storage import checkpoints
from kafkad.storage.cleaner_rewrite import (
    CleanedGroup,
    Piece,
    RewriteRules,
    build_offset_map,
    discard_cleaned,
    group_pieces,
    write_cleaned_group,
)
from kafkad.storage.cleaner_txn import CleanedTxnState
from kafkad.storage.partition_log import PartitionLog
from kafkad.storage.segment import LogSegment

log = logging.getLogger(__name__)

CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class CleanerConfig:
    """Broker-wide cleaner settings (Kafka `CleanerConfig`)."""

    enabled: bool = True
    backoff_ms: int = 15_000  # log.cleaner.backoff.ms: sleep when nothing is cleanable
    # The offset map's capacity in keys (Kafka sizes it from log.cleaner.dedupe.buffer.size, 24 bytes
    # per entry; a Python dict entry costs ~100 bytes plus the key).
    max_map_entries: int = 1_000_000


class LogSource(Protocol):
    """What the cleaner needs of the LogManager."""

    def logs(self) -> Iterator[PartitionLog]: ...
    def log_dir_of(self, topic: str, partition: int) -> str | None: ...
    def get(self, topic: str, partition: int) -> PartitionLog | None: ...


@dataclass(frozen=True, slots=True)
class CleanTask:
    log: PartitionLog
    log_dir: str
    first_dirty: int
    pieces: tuple[Piece, ...]  # every closed segment below first uncleanable, oldest first
    dirty: tuple[Piece, ...]  # the pieces holding offsets >= first dirty
    now_ms: int
    dirty_ratio: float


@dataclass(frozen=True, slots=True)
class CleanStats:
    topic: str
    partition: int
    bytes_read: int
    bytes_written: int
    records_read: int
    records_kept: int
    groups: int
    end_offset: int  # the new first dirty offset
    seconds: float
    completed: bool  # False: a swap was refused, nothing after it was cleaned

    @property
    def mb_per_s(self) -> float:
        return self.bytes_read / 1e6 / self.seconds if self.seconds > 0 else 0.0


Swapper = Callable[[PartitionLog, CleanedGroup], bool]


def _piece(seg: LogSegment, next_offset: int) -> Piece:
    return Piece(seg, seg.fd, seg.base_offset, next_offset, seg.size, seg.offset_index.size_bytes)


class LogCleaner:
    """Decides on the event loop (`grab_filthiest`, `swap_on_loop`); cleans in a thread (`clean`)."""

    def __init__(self, source: LogSource, clock: Clock, config: CleanerConfig | None = None) -> None:
        self.source = source
        self.clock = clock
        self.config = config or CleanerConfig()
        self._lock = threading.Lock()
        self._checkpoints: dict[str, dict[TopicPartition, int]] = {}
        self._horizons: dict[TopicPartition, int] = {}  # earliest delete horizon still pending
        self._in_progress: set[TopicPartition] = set()
        self.last_stats: CleanStats | None = None

    # ---- checkpoints ----------------------------------------------------------------------------

    def _dir_checkpoint(self, log_dir: str) -> dict[TopicPartition, int]:
        with self._lock:
            cp = self._checkpoints.get(log_dir)
            if cp is None:
                try:
                    cp = checkpoints.read_offsets(Path(log_dir) / CLEANER_OFFSET_CHECKPOINT)
                except KafkaError as exc:  # torn: cleaning again from each log's start is only slower
                    log.warning("%s; cleaning from the start of each log", exc.message)
                    cp = {}
                self._checkpoints[log_dir] = cp
            return cp

    def checkpointed(self, topic: str, partition: int) -> int | None:
        d = self.source.log_dir_of(topic, partition)
        return None if d is None else self._dir_checkpoint(d).get((topic, partition))

    def _write_checkpoint(self, log_dir: str, tp: TopicPartition, offset: int) -> None:
        """Blocking: record `offset` as tp's first dirty offset (entries of gone logs are dropped)."""
        with self._lock:
            cp = self._checkpoints.setdefault(log_dir, {})
            cp[tp] = offset
            for gone in [k for k in cp if self.source.get(*k) is None]:
                del cp[gone]
            snapshot = dict(cp)
        checkpoints.write_offsets(Path(log_dir) / CLEANER_OFFSET_CHECKPOINT, snapshot)

    # ---- deciding (event loop) -------------------------------------------------------------------

    def grab_filthiest(self, now_ms: int | None = None) -> CleanTask | None:
        """Loop-safe: the compacted log most in need of cleaning, its segments snapshotted; or None."""
        now = self.clock.time_ms() if now_ms is None else now_ms
        best: CleanTask | None = None
        urgent = False
        for plog in self.source.logs():
            tp = (plog.topic, plog.partition)
            if "compact" not in plog.config.cleanup_policy or tp in self._in_progress:
                continue
            log_dir = self.source.log_dir_of(*tp)
            if log_dir is None:
                continue
            task, need_now = self._task_for(plog, log_dir, now)
            if task is None:
                continue
            if need_now and not urgent:
                best, urgent = task, True
            elif need_now == urgent and (best is None or task.dirty_ratio > best.dirty_ratio):
                best = task
        if best is not None:
            self._in_progress.add((best.log.topic, best.log.partition))
        return best

    def _task_for(self, plog: PartitionLog, log_dir: str, now: int) -> tuple[CleanTask | None, bool]:
        cfg = plog.config
        tp = (plog.topic, plog.partition)
        first_dirty = self._dir_checkpoint(log_dir).get(tp, plog.log_start_offset)
        if not plog.log_start_offset <= first_dirty <= plog.log_end_offset:
            first_dirty = plog.log_start_offset  # truncated or deleted below: start over
        closed = plog.cleanable_segments()
        # Never past the last stable offset (Kafka's firstUncleanableDirtyOffset): an open transaction's
        # data must not be compacted before its marker says whether it counts.
        uncleanable = min(plog.active_segment.base_offset, plog.last_stable_offset)
        pieces: list[Piece] = []
        need_now = False
        for seg, next_offset in closed:
            if next_offset > uncleanable:
                break
            if next_offset > first_dirty:
                age = now - seg.largest_timestamp()
                if cfg.min_compaction_lag_ms > 0 and age < cfg.min_compaction_lag_ms:
                    break
                if age > cfg.max_compaction_lag_ms:
                    need_now = True
            pieces.append(_piece(seg, next_offset))
        dirty = tuple(p for p in pieces if p.next_offset > first_dirty)
        clean_bytes = sum(p.size for p in pieces if p.next_offset <= first_dirty)
        dirty_bytes = sum(p.size for p in dirty)
        total = clean_bytes + dirty_bytes
        ratio = dirty_bytes / total if total else 0.0
        horizon = self._horizons.get(tp)
        tombstones_due = horizon is not None and now >= horizon and clean_bytes > 0
        if not tombstones_due and not (dirty and (need_now or ratio > cfg.min_cleanable_dirty_ratio)):
            return None, False
        task = CleanTask(plog, log_dir, first_dirty, tuple(pieces), dirty, now, ratio)
        return task, need_now

    def swap_on_loop(self, plog: PartitionLog, group: CleanedGroup) -> bool:
        """Event loop: put a cleaned group in place of its old segments, unless the log changed."""
        if self.source.get(plog.topic, plog.partition) is not plog:
            return False  # deleted (or reassigned) while being cleaned
        live = {id(seg): seg.size for seg, _ in plog.cleanable_segments() if not seg.deleted}
        later = [m for m in group.mapped if m.base_offset >= group.end_offset]  # earlier: swapped
        pieces = {id(p.segment): p for p in (*group.pieces, *later)}
        if any(live.get(k) != p.size for k, p in pieces.items()):
            return False  # a segment it was built from is gone, active again, or changed
        old = [p.segment for p in group.pieces]
        return plog.replace_segments(old, group.base_offset, group.end_offset)  # type: ignore[arg-type]

    def done(self, task: CleanTask) -> None:
        """Event loop: the task's log may be picked again."""
        self._in_progress.discard((task.log.topic, task.log.partition))

    # ---- cleaning (blocking) --------------------------------------------------------------------

    def clean(self, task: CleanTask, swap: Swapper) -> CleanStats:
        """Blocking: map the dirty section, rewrite and swap group by group, move the checkpoint."""
        started = time.monotonic()
        plog = task.log
        cfg = plog.config
        # The aborted transactions of the range (cleaner_txn): their data neither maps nor survives.
        first = task.pieces[0].base_offset if task.pieces else task.first_dirty
        last = task.pieces[-1].next_offset if task.pieces else task.first_dirty
        aborted = plog.aborted_txns(first, last) if task.pieces else []
        if task.dirty:
            dirty_start = task.dirty[0].base_offset  # the map walks the dirty part only
            in_dirty = [t for t in aborted if t.last_offset >= dirty_start]
            mapped = build_offset_map(task.dirty, self.config.max_map_entries, in_dirty)
            offsets, end = mapped.offsets, mapped.end_offset
        else:
            offsets, end = {}, task.first_dirty
        sources = [p for p in task.dirty if p.base_offset < end]
        rules = RewriteRules(
            now_ms=task.now_ms,
            delete_retention_ms=cfg.delete_retention_ms,
            index_interval_bytes=cfg.index_interval_bytes,
            index_bytes=cfg.segment_index_bytes,
        )
        todo = [p for p in task.pieces if p.base_offset < end]
        groups = group_pieces(todo, cfg.segment_bytes, cfg.segment_index_bytes)
        read = written = records_read = records_kept = swapped = 0
        horizon: int | None = None
        completed = True
        txn = CleanedTxnState(aborted)  # across the groups: a transaction may span segments
        for group in groups:
            cleaned: CleanedGroup | None = None
            try:
                cleaned = write_cleaned_group(plog.directory, group, offsets, rules, sources, txn)
                ok = swap(plog, cleaned)
            except Exception:
                discard_cleaned(plog.directory, group[0].base_offset)
                raise
            if not ok:
                discard_cleaned(plog.directory, group[0].base_offset)
                log.info("%s-%d: cleaning stopped, the log changed", plog.topic, plog.partition)
                completed = False
                break
            checkpoints.fsync_dir(plog.directory)
            swapped += 1
            read += sum(p.size for p in group)
            written += cleaned.size
            records_read += cleaned.records_read
            records_kept += cleaned.records_kept
            if cleaned.min_delete_horizon is not None:
                horizon = min(horizon or cleaned.min_delete_horizon, cleaned.min_delete_horizon)
        tp = (plog.topic, plog.partition)
        if completed:
            self._write_checkpoint(task.log_dir, tp, end)
            with self._lock:
                if horizon is None:
                    self._horizons.pop(tp, None)
                else:
                    self._horizons[tp] = horizon
        stats = CleanStats(
            plog.topic,
            plog.partition,
            read,
            written,
            records_read,
            records_kept,
            swapped,
            end,
            time.monotonic() - started,
            completed,
        )
        self.last_stats = stats
        log.info(
            "%s-%d cleaned: %d groups, %.1f MB -> %.1f MB, %d -> %d records, up to offset %d, "
            "%.1f MB/s, %d records/s",
            plog.topic,
            plog.partition,
            swapped,
            read / 1e6,
            written / 1e6,
            records_read,
            records_kept,
            end,
            stats.mb_per_s,
            stats.records_read / stats.seconds if stats.seconds > 0 else 0,
        )
        return stats

    def clean_all_now(self) -> list[CleanStats]:
        """Blocking, single-threaded (tests, tools): clean every eligible log once, swapping inline."""
        out: list[CleanStats] = []
        tasks: list[CleanTask] = []
        try:
            while (task := self.grab_filthiest()) is not None:  # each log at most once
                tasks.append(task)
                out.append(self.clean(task, self.swap_on_loop))
        finally:
            for task in tasks:
                self.done(task)
        return out
