"""One partition's log (Kafka `UnifiedLog` + `LocalLog`): ordered segments in `<topic>-<partition>/`.

Append: validate every batch (CRC-32C, sizes, producer sequences), stamp baseOffset and the leader epoch
in place (outside the CRC), set LogAppendTime if the topic asks for it, and write the caller's buffer
with one os.write. Never decodes records. The usual request (one client batch, CreateTime topic) takes an
inline path in `append` (one header unpack, one CRC, one stamp; config limits cached per
LogConfig object); every other request, and any batch that fails its combined test, goes through
the general path (log_append.append_batches), which validates again and raises the precise error. The active (last) segment rolls on segment.bytes, segment.ms
(injected Clock), a full index, or an offset that would not fit int32 relative to its base.

Read: the segment holding the offset returns a FileSlice (sendfile), bounded by max_offset (the high
watermark) and max_bytes (but at least one whole batch with min_one_batch), as Kafka does.

Durability: writes go to the page cache. `flush()` (blocking, callable from an executor thread while
the loop keeps appending: it only fsyncs fds and then moves `recovery_point` forward) is due after
flush.messages / flush.ms or a roll (`flush_due`, the periodic pass); `sync_due` says when an append
must be fsynced before it is answered, which log_sync's group commit does. `open(recover=False)` after a clean shutdown trusts
the indexes (sanity checks only) and the producer snapshot at the log end; `open(recover=True)`
recovers every segment from the one holding the recovery point: keeps the valid prefix of batches,
truncates the torn tail, rebuilds indexes, leader epochs and producer state from batch headers
(log_loader opens the segments, log_restore restores the log's state from them).

Deleted segments (retention, DeleteRecords, truncation) are renamed `*.deleted` and their fds stay open
for file.delete.delay.ms; `reap_deleted()` closes and unlinks them once the delay passed. The ordered
segments and their base offsets are a SegmentList (segment_list; others get its read-only view,
`segments`). The retention policy and that delayed deletion live in log_retention, the log cleaner's
segment swap in cleaner_segments; the methods here delegate to them. Transactions (markers, the last
stable offset, the `.txnindex` aborts a read_committed read gets) live in log_txn.

Concurrency: runs on the event loop and never blocks, except methods documented "blocking".
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from kafkad.clock import Clock
from kafkad.protocol.errors import ErrorCode, KafkaError
from kafkad.storage import cleaner_segments, log_append, log_restore, log_retention, log_txn
from kafkad.storage.crc import crc32c
from kafkad.storage.disk_budget import UNLIMITED_GATE
from kafkad.storage.leader_epoch import LeaderEpochCache
from kafkad.storage.log_config import LogConfig
from kafkad.storage.log_loader import LogStats, load_segments
from kafkad.storage.log_offline import LogIOError
from kafkad.storage.log_types import (
    EARLIEST_LOCAL_TIMESTAMP,
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    AppendOrigin,
    AppendResult,
    ReadResult,
    SegmentInfo,
)
from kafkad.storage.producer_state import ProducerStateManager
from kafkad.storage.records.batch import (
    ATTRIBUTES_OFFSET,
    BATCH_OVERHEAD,
    COMPRESSION_MASK,
    CONTROL_FLAG,
    HEADER_STRUCT,
    LOG_OVERHEAD,
    MAGIC,
    MIN_RECORD_SIZE,
    Compression,
    stamp_header_into,
)
from kafkad.storage.segment import INT32_MAX, LogSegment
from kafkad.storage.segment_list import SegmentList, SegmentView
from kafkad.storage.txn_index import AbortedTxn

log = logging.getLogger(__name__)

__all__ = [
    "EARLIEST_LOCAL_TIMESTAMP",
    "EARLIEST_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "MAX_TIMESTAMP",
    "AppendOrigin",
    "AppendResult",
    "LogStats",
    "PartitionLog",
    "ReadResult",
    "SegmentInfo",
]

_EMPTY = ReadResult([], 0)
_REPLICATION = AppendOrigin.REPLICATION
_CLIENT = AppendOrigin.CLIENT
_MAX_CODEC = int(Compression.ZSTD)
_unpack_header_from = HEADER_STRUCT.unpack_from
_new_tuple = tuple.__new__
# (config they were taken from, segment.bytes, max batchLength, segment.ms or -1 for a LogAppendTime
# topic, message.timestamp.difference.max.ms or -1 when unbounded): see PartitionLog._set_limits.
_Limits = tuple[LogConfig, int, int, int, int]


class PartitionLog:
    def __init__(self, directory: Path, topic: str, partition: int, config: LogConfig, clock: Clock) -> None:
        """Use `PartitionLog.open`."""
        self.directory = directory
        self.topic = topic
        self.partition = partition
        self.config = config
        self.clock = clock
        self.stats = LogStats()
        self._segments = SegmentList()
        self._deletions = log_retention.DelayedDeletions(clock)
        self.log_start_offset = 0
        self.log_end_offset = 0
        self._high_watermark = 0
        self.recovery_point = 0
        self._last_flush_ms = clock.monotonic_ms()
        self._roll_flush_pending = False
        self._truncations = 0  # bumped by every truncation: a flush racing one keeps the recovery point
        self._dir_synced = False
        self._jitter = 0
        self.leader_epoch_cache = LeaderEpochCache(None)
        self.producer_state = ProducerStateManager(directory)
        self.txn_aborts: bool | None = (
            None  # whether a segment may hold an abort (log_txn; None: not known yet)
        )
        self._limits: _Limits = self._set_limits()
        # The disk budget's append-path check (disk_budget.WriteGate); the LogManager installs its own.
        self.write_gate = UNLIMITED_GATE

    # ---- opening -------------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        directory: Path,
        config: LogConfig,
        clock: Clock,
        *,
        recover: bool,
        topic: str | None = None,
        partition: int | None = None,
        recovery_point: int = 0,
        log_start_offset: int = 0,
    ) -> PartitionLog:
        """Blocking: open (or create) the partition directory. See the module docstring for `recover`."""
        if topic is None or partition is None:
            name, _, num = directory.name.rpartition("-")
            topic, partition = topic or name, int(num) if partition is None else partition
        if not os.path.isdir(directory):  # one stat; mkdir(exist_ok) of an existing dir costs two syscalls
            directory.mkdir(parents=True, exist_ok=True)
        self = cls(directory, topic, partition, config, clock)
        self._load(recover=recover, recovery_point=recovery_point, log_start_offset=log_start_offset)
        return self

    def _new_segment(self, base_offset: int) -> LogSegment:
        seg = LogSegment(
            self.directory,
            base_offset,
            index_bytes=self.config.segment_index_bytes,
            index_interval_bytes=self.config.index_interval_bytes,
            now_ms=self.clock.time_ms(),
        )
        jitter = self.config.segment_jitter_ms
        # os.urandom, not the random module (~0.3 MB of RSS for this one draw per segment)
        span = min(jitter, self.config.segment_ms)
        self._jitter = int.from_bytes(os.urandom(8), "little") % span if jitter > 0 and span > 0 else 0
        return seg

    def _load(self, *, recover: bool, recovery_point: int, log_start_offset: int) -> None:
        loaded = load_segments(
            self.directory,
            recover=recover,
            recovery_point=recovery_point,
            new_segment=self._new_segment,
            stats=self.stats,
            contiguous="compact" not in self.config.cleanup_policy,
        )
        self._segments.reset(loaded.segments or [self._new_segment(log_start_offset)])
        log_restore.restore_log(
            self, loaded, recovery_point=recovery_point, log_start_offset=log_start_offset
        )

    def _load_producer_state(self) -> None:
        log_restore.load_producer_state(self)

    # ---- properties ----------------------------------------------------------------------------

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @high_watermark.setter
    def high_watermark(self, offset: int) -> None:
        self._high_watermark = hw = max(self.log_start_offset, min(offset, self.log_end_offset))
        if self.producer_state.unreplicated:  # completed transactions the HW now covers stop holding the LSO
            self.producer_state.first_unstable_offset(hw)

    @property
    def segments(self) -> SegmentView:
        """The segments, oldest first (read-only: they change through this log's methods)."""
        return self._segments

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    @property
    def segment_count(self) -> int:
        return len(self._segments)

    @property
    def active_segment(self) -> LogSegment:
        return self._segments.active

    # ---- append --------------------------------------------------------------------------------

    def append(
        self,
        records: memoryview,
        *,
        leader_epoch: int,
        now_ms: int,
        origin: AppendOrigin = AppendOrigin.CLIENT,
    ) -> AppendResult:
        """Validate, stamp and append the batches of one produce (or replica fetch) request."""
        # The produce hot path. The common request (one non-control batch per partition, CreateTime
        # topic) is handled inline below: one header unpack, one CRC, one stamp, one segment append,
        # producer-state calls only for idempotent producers. Anything else, including any batch the
        # combined test refuses, takes _append_batches, which re-validates and raises the precise error.
        if not isinstance(records, memoryview):
            records = memoryview(records)
        size = len(records)
        gate = self.write_gate  # the disk budget (WriteGate.charge, inlined): may refuse a client write
        gate.remaining -= size
        if gate.remaining < 0:
            gate.measure(size, origin)
        if origin is _REPLICATION:
            return log_append.append_replicated(self, records, now_ms)
        if size < BATCH_OVERHEAD:
            return self._append_batches(records, leader_epoch, now_ms, origin)
        limits = self._limits
        if limits[0] is not self.config:
            limits = self._set_limits()
        _, segment_bytes, max_batch_length, segment_ms, ts_diff = limits
        (
            _,
            batch_length,
            _,
            magic,
            crc,
            attributes,
            last_delta,
            base_ts,
            max_ts,
            producer_id,
            producer_epoch,
            base_seq,
            count,
        ) = _unpack_header_from(records, 0)
        if (
            batch_length + LOG_OVERHEAD != size  # several batches, or a length the slow path refuses
            or magic != MAGIC
            or attributes & CONTROL_FLAG
            or (attributes & COMPRESSION_MASK) > _MAX_CODEC
            or count <= 0
            or count != last_delta + 1
            or (not attributes & COMPRESSION_MASK and count * MIN_RECORD_SIZE > size - BATCH_OVERHEAD)
            or size > segment_bytes
            or batch_length > max_batch_length
            or segment_ms < 0  # LogAppendTime topic (see _set_limits)
            or (ts_diff >= 0 and (abs(max_ts - now_ms) > ts_diff or abs(base_ts - now_ms) > ts_diff))
            or crc32c(records[ATTRIBUTES_OFFSET:]) != crc
        ):
            return self._append_batches(records, leader_epoch, now_ms, origin)
        if producer_id >= 0 and origin is _CLIENT:  # idempotent producer: sequence checks
            duplicate = self.producer_state.check_batch(
                producer_id, producer_epoch, base_seq, last_delta, attributes
            )
            if duplicate is not None:
                return _new_tuple(
                    AppendResult,
                    (duplicate.first_offset, duplicate.last_offset, -1, self.log_start_offset, True),
                )
        first = self.log_end_offset
        last = first + last_delta
        seg = self._segments.active
        seg_size = seg.size
        rolling_ts = seg._rolling_ts
        oi, ti = seg.offset_index, seg.time_index
        # maybe_roll's conditions, inlined; it decides whenever one of them may hold.
        if (
            not seg_size
            or seg_size > segment_bytes - size
            or rolling_ts is None
            or rolling_ts < 0
            or max_ts - rolling_ts > segment_ms - self._jitter
            or oi.entries >= oi.capacity
            or ti.entries >= ti.capacity
            or not 0 <= last - seg.base_offset <= INT32_MAX  # seg.can_hold
        ):
            self.maybe_roll(size, first, last, now_ms, max_ts)
            seg = self._segments.active
        stamp_header_into(records, 0, first, batch_length, leader_epoch)
        seg.append(last, max_ts if max_ts > -1 else -1, first, records)
        epochs = self.leader_epoch_cache
        if leader_epoch > epochs.latest_epoch:
            epochs.assign(leader_epoch, first)
        if producer_id >= 0:
            self.producer_state.record_batch(
                producer_id, producer_epoch, base_seq, last_delta, attributes, first, max_ts
            )
        self.log_end_offset = last + 1
        return _new_tuple(AppendResult, (first, last, -1, self.log_start_offset, False))

    def append_txn_marker(
        self,
        producer_id: int,
        producer_epoch: int,
        committed: bool,
        coordinator_epoch: int,
        *,
        leader_epoch: int,
        now_ms: int,
    ) -> int:
        """Append a COMMIT/ABORT marker for the transaction coordinator; its offset (log_txn)."""
        return log_txn.append_marker(
            self,
            producer_id,
            producer_epoch,
            committed,
            coordinator_epoch,
            leader_epoch=leader_epoch,
            now_ms=now_ms,
        )

    @property
    def last_stable_offset(self) -> int:
        """What read_committed consumers may read up to: min(first unstable offset, HW)."""
        state = self.producer_state
        if not state.ongoing and not state.unreplicated:  # no transaction here: every fetch asks
            return self._high_watermark
        return log_txn.last_stable_offset(self)

    def aborted_txns(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """The aborted transactions overlapping [fetch_offset, upper_bound)."""
        return log_txn.aborted_txns(self, fetch_offset, upper_bound)

    def aborted_txns_for_read(self, fetch_offset: int, result: ReadResult, limit: int) -> list[AbortedTxn]:
        """The aborted transactions overlapping what a read_committed read from `fetch_offset` returned."""
        return log_txn.aborted_txns_for_read(self, fetch_offset, result, limit)

    def _set_limits(self) -> _Limits:
        """Cache what the inline append path needs from the config (re-done when `config` is replaced)."""
        cfg = self.config
        diff = cfg.message_timestamp_difference_max_ms
        self._limits = (
            cfg,
            cfg.segment_bytes,
            cfg.max_message_bytes - LOG_OVERHEAD,
            # -1: never inline (LogAppendTime stamps every batch; a negative bound refuses them all)
            -1 if cfg.log_append_time or diff < 0 else cfg.segment_ms,
            diff if diff < 2**62 else -1,  # -1: no timestamp check
        )
        return self._limits

    def _append_batches(
        self, records: memoryview, leader_epoch: int, now_ms: int, origin: AppendOrigin
    ) -> AppendResult:
        """The general append (log_append.append_batches): several batches, replicas, LogAppendTime."""
        return log_append.append_batches(self, records, leader_epoch, now_ms, origin)

    def maybe_roll(self, size: int, first_offset: int, last_offset: int, now_ms: int, max_ts: int) -> None:
        """Roll (or re-base an empty active segment) if an append of `size` bytes needs it."""
        seg = self._segments.active
        if seg.size == 0:
            if seg.base_offset != first_offset and not seg.can_hold(last_offset):
                self._replace_empty_active(first_offset)
            return
        cfg = self.config
        rolling_ts = seg._rolling_ts  # time_waited_for_roll's common case, inlined (per append)
        if rolling_ts is not None and rolling_ts >= 0 and not cfg.log_append_time:
            waited = max_ts - rolling_ts
        else:
            waited = seg.time_waited_for_roll(now_ms, now_ms if cfg.log_append_time else max_ts)
        if (
            seg.size > cfg.segment_bytes - size
            or waited > cfg.segment_ms - self._jitter
            or seg.offset_index.is_full
            or seg.time_index.is_full
            or not 0 <= last_offset - seg.base_offset <= 0x7FFFFFFF  # seg.can_hold, inlined
        ):
            self.roll(first_offset)

    def _replace_empty_active(self, base_offset: int) -> None:
        self._segments.active.destroy()  # first, as before: nothing runs between this and the swap
        self._segments.replace_active(self._new_segment(base_offset))

    def roll(self, base_offset: int | None = None) -> LogSegment:
        """Close the active segment for appends and start a new one at `base_offset` (default: the LEO)."""
        new_base = self.log_end_offset if base_offset is None else base_offset
        old = self.active_segment
        if old.size == 0:
            if old.base_offset != new_base:
                self._replace_empty_active(new_base)
            return self.active_segment
        old.on_becoming_inactive()
        self.producer_state.take_snapshot(new_base)
        seg = self._new_segment(new_base)
        self._segments.roll(seg)
        self._roll_flush_pending = True
        log.debug("%s-%d: rolled segment at %d", self.topic, self.partition, new_base)
        return seg

    # ---- read ----------------------------------------------------------------------------------

    def read(
        self, offset: int, max_bytes: int, *, max_offset: int | None = None, min_one_batch: bool = True
    ) -> ReadResult:
        """Batches from `offset`: one FileSlice of the segment holding it. OFFSET_OUT_OF_RANGE outside
        [log start, log end]; empty at the end or at/after `max_offset` (the high watermark)."""
        leo = self.log_end_offset
        if offset > leo or offset < self.log_start_offset:
            raise KafkaError(
                ErrorCode.OFFSET_OUT_OF_RANGE,
                f"offset {offset} not in [{self.log_start_offset}, {leo}] of {self.topic}-{self.partition}",
            )
        limit = leo if max_offset is None else min(max_offset, leo)
        if offset >= limit:
            return _EMPTY
        segments = self._segments
        i, seg, next_base = segments.locate(offset)
        while True:
            max_position = seg.size
            if limit < leo and (next_base is None or limit < next_base):
                found = seg.start_of(limit)
                if found is not None:
                    max_position = found
            piece = seg.read(offset, max_bytes, max_position, min_one_batch)
            if piece is not None and piece.size > 0:
                return ReadResult([piece], piece.size)
            if next_base is None or limit <= next_base:
                break
            i += 1
            seg, next_base = segments[i], segments.next_base(i)
        return _EMPTY

    def offset_for_timestamp(self, ts_ms: int) -> tuple[int, int] | None:
        """ListOffsets: (timestamp, offset) of the first batch with a timestamp >= `ts_ms`, or None.

        Special targets: -2 earliest, -1 latest (log end; the handler bounds it by the HW), -3 the
        first record holding the max timestamp (Kafka 3.8+, KAFKA-16310: the record's own offset, not its
        batch's). Timestamp -1 in answers means "no timestamp".
        """
        if ts_ms in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
            return -1, self.log_start_offset
        if ts_ms == LATEST_TIMESTAMP:
            return -1, self.log_end_offset
        if ts_ms == MAX_TIMESTAMP:
            best = max(self._segments, key=lambda s: s.max_timestamp)
            if best.max_timestamp < 0:
                return None
            # Only the batch holding the max timestamp is decoded (the segment's time index points at
            # it); its first record carrying that timestamp is the answer, as Kafka's offsetOfMaxTimestamp.
            found = best.find_offset_by_timestamp(best.max_timestamp, best.base_offset)
            offset = best.offset_of_max_timestamp if found is None else found[1]
            return best.max_timestamp, max(offset, self.log_start_offset)
        for seg in self._segments:
            if seg.max_timestamp >= ts_ms and self._segment_end(seg) > self.log_start_offset:
                found = seg.find_offset_by_timestamp(ts_ms, self.log_start_offset)
                if found is not None:
                    return found
        return None

    def _segment_end(self, seg: LogSegment) -> int:
        return self._segments.end_offset(seg, self.log_end_offset)

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: (largest epoch <= requested, its end offset), (-1, -1) if unknown."""
        return self.leader_epoch_cache.end_offset_for(epoch, self.log_end_offset)

    # ---- truncation and deletion ---------------------------------------------------------------

    def truncate_to(self, offset: int) -> None:
        """Follower truncation: remove every offset >= `offset` (no-op at/after the log end)."""
        if offset >= self.log_end_offset:
            return
        if offset < self.log_start_offset:
            self.truncate_fully_and_start_at(offset)
            return
        for seg in self._segments.truncate_after(offset):
            self._schedule_delete(seg)
        active = self.active_segment
        active.truncate_to(offset)
        active.resize_indexes(self.config.segment_index_bytes)
        self._after_truncation(offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Drop every segment and restart the log empty at `offset`."""
        for seg in self._segments.reset(()):
            self._schedule_delete(seg)  # renamed away before a new segment may reuse the base's names
        self._segments.reset([self._new_segment(offset)])
        self.log_start_offset = offset
        self.leader_epoch_cache.clear()
        self._after_truncation(offset)

    def _after_truncation(self, offset: int) -> None:
        self._truncations += 1
        self.log_end_offset = offset
        self._high_watermark = min(self._high_watermark, offset)
        self.recovery_point = min(self.recovery_point, offset)
        self.leader_epoch_cache.truncate_from_end(offset)
        self.producer_state.delete_snapshots(lambda o: o > offset)
        self._load_producer_state()

    def delete_records(self, before_offset: int) -> int:
        """DeleteRecords: move the log start to `before_offset` (<= HW); returns the new log start."""
        if before_offset > self._high_watermark or before_offset < 0:
            raise KafkaError(
                ErrorCode.OFFSET_OUT_OF_RANGE,
                f"{before_offset} is above the high watermark {self._high_watermark}",
            )
        if before_offset > self.log_start_offset:
            self._advance_log_start(before_offset)
            while len(self._segments) > 1 and self._segments[1].base_offset <= self.log_start_offset:
                self._delete_first_segment()
        return self.log_start_offset

    def _advance_log_start(self, offset: int) -> None:
        self.log_start_offset = offset
        self._high_watermark = max(self._high_watermark, offset)
        self.leader_epoch_cache.truncate_from_start(offset)
        self.producer_state.truncate_head(offset)

    def _delete_first_segment(self) -> SegmentInfo:
        seg = self._segments.drop_first()
        first_base = self._segments.first_base
        info = SegmentInfo(seg.base_offset, first_base, seg.size, seg.largest_timestamp())
        self._schedule_delete(seg)
        if self.log_start_offset < first_base:
            self._advance_log_start(first_base)
        return info

    def _schedule_delete(self, seg: LogSegment) -> None:
        self._deletions.schedule(seg, self.config.file_delete_delay_ms)

    def pop_expired_deletions(self, force: bool = False) -> list[LogSegment]:
        """Deleted segments whose delay passed (all with `force`); destroy() them in an executor."""
        return self._deletions.pop_expired(force)

    def reap_deleted(self, force: bool = False) -> int:
        """Blocking: close and unlink deleted segments whose file.delete.delay.ms passed."""
        due = self.pop_expired_deletions(force)
        for seg in due:
            seg.destroy()
        return len(due)

    # ---- retention (log_retention) -------------------------------------------------------------

    def closed_segments(self) -> list[SegmentInfo]:
        """Every segment but the active one, oldest first (for a broker-wide disk budget)."""
        return log_retention.closed_segments(self)

    def retention_candidates(self, now_ms: int) -> list[SegmentInfo]:
        """The oldest closed segments that retention.ms / retention.bytes / the log start allow deleting."""
        return log_retention.retention_candidates(self, now_ms)

    def delete_oldest_segment(self) -> SegmentInfo | None:
        """Delete the oldest closed segment (retention or disk budget); None if only the active is left."""
        if len(self._segments) < 2:
            return None
        return self._delete_first_segment()

    def apply_retention(self, now_ms: int) -> int:
        """Delete every retention candidate; rolls an expired active segment first. Returns the count."""
        return log_retention.apply_retention(self, now_ms)

    # ---- durability ----------------------------------------------------------------------------

    @property
    def unflushed_messages(self) -> int:
        return self.log_end_offset - self.recovery_point

    @property
    def last_flush_ms(self) -> int:
        """Monotonic ms of the last `flush()` (or of the open): the background flusher's age test."""
        return self._last_flush_ms

    def flush_due(self) -> bool:
        """Whether flush.messages / flush.ms / a roll call for `flush()` now."""
        if self.recovery_point >= self.log_end_offset:
            return False
        return (
            self._roll_flush_pending
            or self.unflushed_messages >= self.config.flush_messages
            or self.clock.monotonic_ms() - self._last_flush_ms >= self.config.flush_ms
        )

    def sync_due(self) -> bool:
        """Whether flush.messages / flush.ms ask that what was just appended be fsynced before it is
        answered (log_sync). Callers test `config.sync_on_append` first: the default never asks."""
        unflushed = self.log_end_offset - self.recovery_point
        if unflushed <= 0:
            return False
        cfg = self.config
        return (
            unflushed >= cfg.flush_messages or self.clock.monotonic_ms() - self._last_flush_ms >= cfg.flush_ms
        )

    def flush(self, up_to: int | None = None) -> int:
        """Blocking: fsync the segments holding [recovery point, up_to) and advance the recovery point.

        Safe on an executor thread while the loop appends: it reads a copy of the segment list and only
        fsyncs fds (the log with fdatasync, the indexes, and the directory when a segment was created
        since the last flush, as Kafka's LocalLog.flush); the sole write is the final `recovery_point`,
        never past the log end read before the fsyncs and never at all if the loop truncated the log
        meanwhile (what it covered may have been replaced). One flush at a time per log (log_sync).
        Returns the new recovery point.
        """
        end = self.log_end_offset
        truncations = self._truncations
        target = end if up_to is None else min(up_to, end)
        start = self.recovery_point
        self._roll_flush_pending = False
        self._last_flush_ms = self.clock.monotonic_ms()
        if target <= start:
            return start
        segments = self._segments.snapshot()
        new_segment = False
        for i, seg in enumerate(segments):
            next_base = segments[i + 1].base_offset if i + 1 < len(segments) else None
            if seg.base_offset < target and (next_base is None or next_base > start):
                seg.fsync()
                new_segment = new_segment or seg.base_offset >= start
        if new_segment:  # the new segment files' directory entries must survive a power loss too
            self._fsync_dirs()
        if truncations == self._truncations:
            self.recovery_point = min(max(self.recovery_point, target), self.log_end_offset)
        return self.recovery_point

    def _fsync_dirs(self) -> None:
        """Blocking: fsync the partition directory (and, the first time, the log dir holding it)."""
        dirs = [self.directory] if self._dir_synced else [self.directory, self.directory.parent]
        for d in dirs:
            try:
                fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
            except OSError as exc:
                raise LogIOError(d, exc, transient=False) from exc
        self._dir_synced = True

    def release(self) -> None:
        """Blocking: close every fd without writing anything (the log was deleted / its dir renamed).

        Segments pending deletion are closed too, whatever their delay: the whole log is going away.
        """
        for seg in self._deletions.pop_all():
            seg.close()
        for seg in self._segments.reset(()):
            seg.close()

    def close(self) -> None:
        """Blocking: clean shutdown of this log: flush, producer snapshot at the log end, close files."""
        self.flush()
        self.producer_state.take_snapshot(self.log_end_offset, fsync=True)
        self.leader_epoch_cache.flush()
        self.reap_deleted(force=True)
        for seg in self._segments.reset(()):
            seg.close()

    # ---- log cleaner (compaction: cleaner_segments) -------------------------------------------

    def cleanable_segments(self) -> list[tuple[LogSegment, int]]:
        """The closed segments (never the active one) with the base of the segment after each."""
        return cleaner_segments.cleanable_segments(self)

    def replace_segments(self, old: list[LogSegment], base_offset: int, end_offset: int) -> bool:
        """Cleaner: swap the cleaned files of `base_offset` (cleaner_swap) in place of `old`.

        Refused (False, nothing renamed) unless `old` is still a run of closed, live segments of this
        log followed by a segment at `end_offset` (truncation, retention or deletion may have raced
        the cleaner). Renames only; reads in flight keep the old fds (see cleaner_segments).
        """
        return cleaner_segments.replace_segments(
            self, self._segments, old, base_offset, end_offset, self._schedule_delete
        )
