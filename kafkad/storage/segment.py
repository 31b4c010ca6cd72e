"""One log segment (Kafka `LogSegment`): `.log` + `.index` + `.timeindex` named by the base offset.

The `.log` holds record batches exactly as stored on the wire, appended with os.write on an O_APPEND fd
(sequential, through the page cache). Reads never copy: `read()` returns a FileSlice over that fd and
the connection sendfiles it.

Finding a position (`locate`, the fetch path): the active segment keeps a tail ring of (last offset,
start position) of each append, in two generations of two parallel lists: the appends since an offset
index entry (the indexed append first) and those of the interval before it, so the ring always covers at
least index.interval.bytes before the log end whatever the phase of the index. An index entry shifts the
generations once the newer holds `_RING_MIN` appends (so large appends, each indexed, still leave the
last 16-32 of them in the ring). A tail fetch bisects and reads one 27-byte header, or nothing when it
starts where an append of the ring starts (a follower's or a caught-up consumer's next fetch: the append's
size bounds its first batch's, so `read` needs no header unless that size exceeds max_bytes). Anything else is an
offset-index lookup (binary search over the mmap) then a walk over the batch headers from that position,
in memory over 16 KiB preads (the walk covers about index.interval.bytes, never one pread per batch).
The ring is only a cache, never on disk: it starts empty (open, recovery, cleaned segments), is cleared
on truncation and at roll, and only ever holds consecutive appends ending at the log end, which is what
makes "first element > offset -> ask the index" and "past the last element -> no batch" correct.

Index rule (Kafka): before adding an append, if more than index.interval.bytes were appended since the
last entry, index (last offset of this append, its start position) and (max timestamp so far, its
offset). Recovery rebuilds both indexes per batch with the same rule.

Deletion renames the three files to `*.deleted` and keeps the fds open; `destroy()` closes and unlinks
later (PartitionLog waits file.delete.delay.ms), so a FileSlice being sent stays valid.

Concurrency: runs on the event loop, except `fsync()`, `recover()` and `destroy()` (blocking).
`fsync()` only touches fds and may run on an executor thread while the loop appends.
"""

from __future__ import annotations

import logging
import mmap
import os
import struct
from bisect import bisect_right
from pathlib import Path

from kafkad.protocol.errors import ErrorCode, KafkaError
from kafkad.storage.checkpoints import remove_quietly
from kafkad.storage.file_slice import FileSlice
from kafkad.storage.log_offline import LogIOError
from kafkad.storage.offset_index import OffsetIndex
from kafkad.storage.records import BATCH_OVERHEAD, BatchHeader, decode_batch, header_from, scan_valid_prefix
from kafkad.storage.records.batch import HEADER_STRUCT, LOG_OVERHEAD, MAGIC, read_header_at
from kafkad.storage.time_index import TimeIndex
from kafkad.storage.txn_index import TXN_INDEX_SUFFIX, TransactionIndex

log = logging.getLogger(__name__)

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
DELETED_SUFFIX = ".deleted"
INT32_MAX = 0x7FFFFFFF


def file_stem(base_offset: int) -> str:
    """Kafka's file name for a base offset: 20 digits, zero-padded."""
    return f"{base_offset:020d}"


class LogSegment:
    def __init__(
        self, directory: Path, base_offset: int, *, index_bytes: int, index_interval_bytes: int, now_ms: int
    ) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.index_bytes = index_bytes
        stem = file_stem(base_offset)
        self.log_path = directory / (stem + LOG_SUFFIX)
        self._fd = os.open(self.log_path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        self.size = os.fstat(self._fd).st_size
        self.offset_index = OffsetIndex(directory / (stem + INDEX_SUFFIX), base_offset, index_bytes)
        self.time_index = TimeIndex(directory / (stem + TIME_INDEX_SUFFIX), base_offset, index_bytes)
        # Aborted transactions whose marker is here (opened at first use: most segments have none).
        self.txn_index = TransactionIndex(directory / (stem + TXN_INDEX_SUFFIX))
        self.created_ms = now_ms
        self.bytes_since_last_index_entry = 0
        self.max_timestamp = -1
        self.offset_of_max_timestamp = base_offset
        self._rolling_ts: int | None = None
        self.deleted = False
        # Tail ring (module docstring): parallel lists, so an append adds two list.append calls.
        self._ring_offsets: list[int] = []  # since the last index entry
        self._ring_positions: list[int] = []
        self._older_offsets: list[int] = []  # the interval before, ending just before _ring_offsets[0]
        self._older_positions: list[int] = []
        if self.time_index.entries:
            self.max_timestamp, self.offset_of_max_timestamp = self.time_index.last_entry()

    @property
    def fd(self) -> int:
        return self._fd

    # ---- reading -------------------------------------------------------------------------------

    def header_at(self, position: int) -> BatchHeader:
        """The batch header at `position` (its `position` field is the file position)."""
        try:
            return read_header_at(self._fd, position)
        except KafkaError as exc:
            raise KafkaError(exc.code, f"{self.log_path}: {exc.message}") from exc

    def translate_offset(self, offset: int, starting_position: int = 0) -> BatchHeader | None:
        """The first batch at or after `starting_position` whose last offset >= `offset`, or None."""
        position = max(self.offset_index.lookup(offset)[1], starting_position)
        end = self.size
        while position < end:
            header = self.header_at(position)
            if header.last_offset >= offset:
                return header
            position += header.size
        return None

    def locate(self, offset: int) -> tuple[int, int] | None:
        """(position, size) of the first batch whose last offset >= `offset`, or None.

        The fetch path: the tail ring when it covers `offset` (module docstring), else the offset index;
        then a header walk that unpacks 27 bytes per batch to a tuple instead of building a BatchHeader.
        """
        offsets = self._ring_offsets
        if offsets:
            i = bisect_right(offsets, offset - 1)  # the first append whose last offset >= offset
            if i == len(offsets):
                return None  # past the last batch of the segment
            if i:  # appends i-1 and i are consecutive: the batch is in append i
                return self._walk(self._ring_positions[i], offset, _PREFIX.size)
            older = self._older_offsets
            if older:
                i = bisect_right(older, offset - 1)
                if i == len(older):  # after the older generation: in the first append of the ring
                    return self._walk(self._ring_positions[0], offset, _PREFIX.size)
                if i:
                    return self._walk(self._older_positions[i], offset, _PREFIX.size)
        return self._walk(self.offset_index.lookup(offset)[1], offset, _CHUNK)

    def _walk(self, position: int, offset: int, first_read: int) -> tuple[int, int] | None:
        """Walk batch headers from `position` (a batch start) to the first whose last offset >= `offset`.

        Reads `first_read` bytes, then 16 KiB chunks, and parses every header that fits in memory.
        """
        end = self.size
        fd = self._fd
        unpack_from = _PREFIX.unpack_from
        header_size = _PREFIX.size
        want = first_read
        while position < end:
            buf = os.pread(fd, min(want, end - position), position)
            n = len(buf)
            if n < header_size:
                break  # a torn header at the end (recovery cuts it)
            at = 0
            while at + header_size <= n:
                base_offset, length, _, magic, _, _, last_delta = unpack_from(buf, at)
                if magic != 2 or length < BATCH_OVERHEAD - 12:
                    raise KafkaError(
                        ErrorCode.CORRUPT_MESSAGE, f"{self.log_path}: bad batch header at {position + at}"
                    )
                if base_offset + last_delta >= offset:
                    return position + at, length + 12
                at += length + 12
            position += at  # the next header's start (it did not fit, or lies past this chunk)
            want = _CHUNK
        return None

    def read(
        self, start_offset: int, max_size: int, max_position: int, min_one_batch: bool
    ) -> FileSlice | None:
        """Up to `max_size` bytes from the batch holding `start_offset`, never past `max_position`.

        With `min_one_batch` the first batch is returned whole even when larger than `max_size`.
        Like Kafka the slice may end inside a batch (clients drop a partial last batch).
        None when no batch of this segment holds `start_offset` or later.
        """
        hit = self._append_at(start_offset)
        if hit is not None and (not min_one_batch or hit[1] - hit[0] <= max_size):
            # The first batch is no larger than its append, which fits: its size changes nothing.
            start, limit = hit[0], max_size
        else:
            found = self.locate(start_offset)
            if found is None:
                return None
            start, size = found
            limit = max(max_size, size) if min_one_batch else max_size
        if start >= max_position:
            return FileSlice(self._fd, start, 0)
        return FileSlice(self._fd, start, min(max_position - start, limit))

    def start_of(self, offset: int) -> int | None:
        """The position of the first batch whose last offset >= `offset` (`locate`'s, with no read when
        `offset` opens an append of the tail ring), or None."""
        hit = self._append_at(offset)
        if hit is not None:
            return hit[0]
        found = self.locate(offset)
        return None if found is None else found[0]

    def _append_at(self, offset: int) -> tuple[int, int] | None:
        """(start, end) in the file of the tail ring's append that follows the one ending at `offset` - 1:
        where a follower's or a tailing consumer's fetch begins (it asks for the offset after what it has),
        known with no read. None for any other offset. The two generations are consecutive appends (the
        older one ends just before the newer's first), so an append's predecessor may be in either."""
        prev = offset - 1
        ring = self._ring_offsets
        i = bisect_right(ring, prev)  # the ring's append holding `offset`, if any
        if i == len(ring):
            return None
        if i:
            before = ring[i - 1]
        else:
            older = self._older_offsets
            j = bisect_right(older, prev)
            if j < len(older):  # in the older generation
                if j == 0 or older[j - 1] != prev:
                    return None
                at = self._older_positions
                return at[j], at[j + 1] if j + 1 < len(at) else self._ring_positions[0]
            if not older:
                return None
            before = older[-1]
        if before != prev:
            return None
        at = self._ring_positions
        return at[i], at[i + 1] if i + 1 < len(at) else self.size

    def read_next_offset(self) -> int:
        """The offset after the last batch: scans only the headers after the last index entry."""
        position = self.offset_index.lookup(2**62)[1] if self.offset_index.entries else 0
        next_offset = self.base_offset
        while position < self.size:
            header = self.header_at(position)
            next_offset = header.last_offset + 1
            if header.max_timestamp > self.max_timestamp:
                self.max_timestamp = header.max_timestamp
                self.offset_of_max_timestamp = header.base_offset
            position += header.size
        return next_offset

    def find_offset_by_timestamp(self, timestamp: int, start_offset: int) -> tuple[int, int] | None:
        """(timestamp, offset) of the first record at/after `start_offset` with a timestamp >= `timestamp`
        (Kafka's `findOffsetByTimestamp`). Records are walked only in the one matching batch (a compressed
        one is decompressed, as Kafka does); a LogAppendTime batch answers with its first offset, since
        every record in it carries the batch's timestamp."""
        _, indexed_offset = self.time_index.lookup(timestamp)
        position = self.offset_index.lookup(max(indexed_offset, start_offset))[1]
        while position < self.size:
            header = self.header_at(position)
            if header.max_timestamp >= timestamp and header.last_offset >= start_offset:
                if header.timestamp_type == 0:
                    found = self._first_record_at_or_after(header, timestamp, start_offset)
                    if found is not None:
                        return found
                return header.max_timestamp, max(header.base_offset, start_offset)
            position += header.size
        return None

    def _first_record_at_or_after(
        self, header: BatchHeader, timestamp: int, start_offset: int
    ) -> tuple[int, int] | None:
        data = os.pread(self._fd, header.size, header.position)
        if header.compression != 0:
            try:
                batch = decode_batch(data)
            except Exception:  # codec errors come in each library's own types
                return None  # undecodable: fall back to batch granularity
            for rec in batch.records:
                if rec.timestamp >= timestamp and rec.offset >= start_offset:
                    return rec.timestamp, rec.offset
            return None
        pos = BATCH_OVERHEAD
        try:
            for _ in range(header.records_count):
                length, pos = _varint(data, pos)
                end = pos + length
                ts_delta, p = _varint(data, pos + 1)  # skip the record attributes byte
                offset_delta, _ = _varint(data, p)
                ts, offset = header.base_timestamp + ts_delta, header.base_offset + offset_delta
                if ts >= timestamp and offset >= start_offset:
                    return ts, offset
                pos = end
        except IndexError:
            pass  # malformed records: fall back to batch granularity
        return None

    def time_waited_for_roll(self, now_ms: int, message_timestamp: int) -> int:
        """Kafka's `timeWaitedForRoll`: the incoming batches' max timestamp minus the first batch's max
        timestamp (so replayed old timestamps do not roll on every append); without record timestamps,
        wall-clock time since the segment was created."""
        if self._rolling_ts is None and self.size:
            self._rolling_ts = self.header_at(0).max_timestamp
        if self._rolling_ts is not None and self._rolling_ts >= 0:
            return message_timestamp - self._rolling_ts
        return now_ms - self.created_ms

    def largest_timestamp(self) -> int:
        """Retention age reference: max record timestamp, or the file mtime if there is none."""
        if self.max_timestamp >= 0:
            return self.max_timestamp
        return int(os.fstat(self._fd).st_mtime * 1000)

    # ---- writing -------------------------------------------------------------------------------

    def can_hold(self, offset: int) -> bool:
        return 0 <= offset - self.base_offset <= INT32_MAX

    def append(
        self, largest_offset: int, largest_ts: int, offset_of_max_ts: int, records: memoryview
    ) -> None:
        """Append already-offset-stamped batches; maintain the sparse indexes."""
        if not 0 <= largest_offset - self.base_offset <= INT32_MAX:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"offset {largest_offset} overflows segment")
        position = self.size
        size = len(records)
        fd = self._fd
        try:
            written = os.write(fd, records)  # one syscall for the whole request's batches
            while written < size:  # short write: retry the rest
                written += os.write(fd, records[written:])
        except OSError as exc:
            try:
                os.ftruncate(fd, position)  # never leave half a batch behind a failed write
            except OSError:
                raise LogIOError(self.log_path, exc, transient=False) from exc  # it may be left
            raise LogIOError(self.log_path, exc) from exc
        self.size = position + size
        if not position and self._rolling_ts is None:
            self._rolling_ts = largest_ts
        # Index rule (module docstring), inline: this runs once per produced partition batch.
        max_ts = self.max_timestamp
        if largest_ts > max_ts:
            self.max_timestamp = max_ts = largest_ts
            self.offset_of_max_timestamp = offset_of_max_ts
        since = self.bytes_since_last_index_entry
        if since > self.index_interval_bytes:
            self.offset_index.append(largest_offset, position)
            if max_ts >= 0:  # the time index ignores a timestamp <= its newest entry's
                self.time_index.maybe_append(max_ts, self.offset_of_max_timestamp)
            self.bytes_since_last_index_entry = size
            if len(self._ring_offsets) >= _RING_MIN:
                # Tail ring: the generations shift; this append opens the new one.
                self._older_offsets, self._older_positions = self._ring_offsets, self._ring_positions
                self._ring_offsets, self._ring_positions = [largest_offset], [position]
                return
        else:
            self.bytes_since_last_index_entry = since + size
        offsets = self._ring_offsets
        offsets.append(largest_offset)
        self._ring_positions.append(position)
        if len(offsets) >= _RING_MAX:  # only with a large index.interval.bytes: shift as if indexed
            self._older_offsets, self._older_positions = offsets, self._ring_positions
            self._ring_offsets, self._ring_positions = [], []

    def truncate_to(self, offset: int) -> int:
        """Remove batches with offsets >= `offset` (batch boundaries); returns bytes removed."""
        found = self.locate(offset)
        if found is None:
            return 0
        position = found[0]
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        removed = self.size - position
        os.ftruncate(self._fd, position)
        self.size = position
        self.bytes_since_last_index_entry = 0
        self.clear_tail_ring()  # its last element may describe removed batches
        self._rolling_ts = None if position == 0 else self._rolling_ts
        self._reload_max_timestamp()
        return removed

    def _reload_max_timestamp(self) -> None:
        self.max_timestamp, self.offset_of_max_timestamp = self.time_index.last_entry()
        if self.max_timestamp < 0:
            self.offset_of_max_timestamp = self.base_offset
        self.read_next_offset()  # folds in the batches after the last time index entry

    def recover(self, flushed_until: int = -1) -> tuple[list[BatchHeader], int]:
        """Blocking: keep the valid prefix of `.log`, truncate the rest, rebuild both indexes.

        `flushed_until` (the log's recovery point): the batches wholly below it were fsynced before the
        crash, so their headers are walked (structure and offsets checked) but their CRC is not
        recomputed; every batch from the first one reaching it on is CRC-checked. Returns the headers
        of the kept batches and the number of bytes truncated.
        """
        self.offset_index.reset()
        self.time_index.reset()
        self.txn_index.reset()  # derived again by the producer-state replay (log_restore)
        # Room for the rebuild: a cleanly closed index was trimmed to its entries, and the rebuild over
        # every batch can index more densely than the live appends did (found by tests/chaos).
        lengths = self.offset_index.file_length, self.time_index.file_length
        self.resize_indexes(max(self.index_bytes, *lengths))
        self.max_timestamp, self.offset_of_max_timestamp = -1, self.base_offset
        self.bytes_since_last_index_entry = 0
        self.clear_tail_ring()
        size = os.fstat(self._fd).st_size
        headers: list[BatchHeader] = []
        valid = 0
        if size and flushed_until > self.base_offset:
            # No MAP_POPULATE: the walk touches one page per batch header.
            with mmap.mmap(self._fd, size, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ) as mm:
                view = memoryview(mm)
                try:
                    headers, valid = _walk_flushed(view, flushed_until)
                finally:
                    view.release()
        if valid < size:
            headers.extend(self._scan_from(valid, size, headers[-1] if headers else None))
            valid = headers[-1].position + headers[-1].batch_length + LOG_OVERHEAD if headers else 0
        kept = self._index_recovered(headers)
        self.offset_index.resize(lengths[0])  # the files' lengths as they were, unless the rebuild needs more
        self.time_index.resize(lengths[1])
        if kept < len(headers):  # a batch outside the segment's offsets: cut there
            headers, valid = headers[:kept], headers[kept].position
        truncated = size - valid
        if truncated:
            log.warning("%s: truncating %d invalid bytes at position %d", self.log_path, truncated, valid)
            os.ftruncate(self._fd, valid)
        self.size = valid
        self._rolling_ts = None
        return headers, truncated

    def _scan_from(self, start: int, size: int, previous: BatchHeader | None) -> list[BatchHeader]:
        """Headers of the CRC-valid batches from `start` on (positions in the file), in offset order
        after `previous` (the batch just before `start`)."""
        aligned = start - start % mmap.ALLOCATIONGRANULARITY
        # MAP_POPULATE: fault the scanned range in at once instead of a page fault per 4 KiB.
        flags = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)
        with mmap.mmap(self._fd, size - aligned, flags=flags, prot=mmap.PROT_READ, offset=aligned) as mm:
            view = memoryview(mm)
            try:
                with view[start - aligned :] as tail:
                    found, _ = scan_valid_prefix(tail)
            finally:
                view.release()
        if (
            found
            and previous is not None
            and found[0].base_offset <= previous.base_offset + previous.last_offset_delta
        ):
            return []  # offsets go backwards at `start`: the log ends there
        if start:
            return [h._replace(position=h.position + start) for h in found]
        return found

    def _index_recovered(self, headers: list[BatchHeader]) -> int:
        """`_index` of every recovered batch in one loop (recovery of a GiB is ~65k batches).

        Offsets outside this segment (first batch below the base, relative offset past int32) are
        corrupt: indexing stops at the first such batch. Returns how many batches were indexed.
        """
        base = self.base_offset
        interval = self.index_interval_bytes
        offset_index, time_index = self.offset_index, self.time_index
        since = self.bytes_since_last_index_entry
        max_ts, offset_of_max_ts = self.max_timestamp, self.offset_of_max_timestamp
        indexed_ts = time_index.last_entry()[0] if time_index.entries else None
        kept = 0
        for h in headers:
            position, base_offset, batch_length, _, _, _, _, last_delta, _, ts = h[:10]
            last = base_offset + last_delta
            if not (0 <= base_offset - base <= INT32_MAX and 0 <= last - base <= INT32_MAX):
                break
            kept += 1
            if ts > max_ts:
                max_ts, offset_of_max_ts = ts, base_offset
            if since > interval:
                offset_index.append(last, position)
                # maybe_append ignores a timestamp <= its last one: skip the call then.
                if max_ts >= 0 and (indexed_ts is None or max_ts > indexed_ts):
                    time_index.maybe_append(max_ts, offset_of_max_ts)
                    indexed_ts = max_ts
                since = 0
            since += batch_length + LOG_OVERHEAD
        self.max_timestamp, self.offset_of_max_timestamp = max_ts, offset_of_max_ts
        self.bytes_since_last_index_entry = since
        return kept

    def sanity_check(self, next_base: int | None = None) -> None:
        """Cheap checks of a segment opened without recovery; KafkaError(CORRUPT_MESSAGE) on failure.

        `next_base` (the next segment's base offset): the last entries of both indexes must be below it.
        """
        oi, ti = self.offset_index, self.time_index
        oi.sanity_check()
        ti.sanity_check()
        if oi.entries:
            offset, position = oi.entry(oi.entries - 1)
            if position >= max(self.size, 1):
                raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"{oi.path}: points past the log end")
            if next_base is not None and offset >= next_base:
                raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"{oi.path}: offset {offset} in the next segment")
        if next_base is not None and ti.entries and ti.last_entry()[1] >= next_base:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"{ti.path}: offset in the next segment")

    def on_becoming_inactive(self) -> None:
        """At roll: final time index entry (so the max timestamp survives restart), trim the indexes,
        drop the tail ring (only the active segment's tail is fetched often enough to need it)."""
        self.clear_tail_ring()
        if self.max_timestamp >= 0:
            self.time_index.maybe_append(
                self.max_timestamp, self.offset_of_max_timestamp, skip_full_check=True
            )
        self.offset_index.trim()
        self.time_index.trim()

    def clear_tail_ring(self) -> None:
        """Forget the tail ring: `locate` asks the offset index until the next appends refill it."""
        self._ring_offsets, self._ring_positions = [], []
        self._older_offsets, self._older_positions = [], []

    def resize_indexes(self, size: int) -> None:
        self.offset_index.resize(size)
        self.time_index.resize(size)

    def fsync(self) -> None:
        """Blocking: make the log and both indexes durable. Safe from an executor thread."""
        try:
            os.fdatasync(self._fd)  # data and the file size; the mtime is not worth a journal write
            self.offset_index.fsync()
            self.time_index.fsync()
            self.txn_index.fsync()
        except OSError as exc:
            if not self.deleted:  # the page cache may have dropped what failed: never transient
                raise LogIOError(self.log_path, exc, transient=False) from exc

    def close(self) -> None:
        """Trim the indexes and close every fd (clean shutdown)."""
        if self._fd < 0:
            return
        self.offset_index.close()
        self.time_index.close()
        os.close(self._fd)
        self._fd = -1

    def mark_deleted(self) -> None:
        """Rename the files to *.deleted; the fds stay open until destroy()."""
        if self.deleted:
            return
        self.deleted = True
        for index in (self.offset_index, self.time_index):
            index.rename(index.path.with_name(index.path.name + DELETED_SUFFIX))
        self.txn_index.rename(self.txn_index.path.with_name(self.txn_index.path.name + DELETED_SUFFIX))
        new_log = self.log_path.with_name(self.log_path.name + DELETED_SUFFIX)
        os.rename(self.log_path, new_log)
        self.log_path = new_log

    def destroy(self) -> None:
        """Blocking: close the fds and unlink the files."""
        paths = [self.log_path, self.offset_index.path, self.time_index.path, self.txn_index.path]
        self.close()
        for path in paths:
            remove_quietly(path)

    def __repr__(self) -> str:
        return f"LogSegment(base={self.base_offset}, size={self.size})"


def _walk_flushed(view: memoryview, flushed_until: int) -> tuple[list[BatchHeader], int]:
    """Recovery's walk over the leading batches that end below `flushed_until` (fsynced, so no CRC):
    their headers and where the walk stopped (at the first batch reaching it, or the first whose
    header is not sane: short, wrong magic or offsets not increasing; the CRC scan starts there)."""
    end = len(view)
    headers: list[BatchHeader] = []
    pos = 0
    last_offset = -1
    unpack = HEADER_STRUCT.unpack_from
    while end - pos >= BATCH_OVERHEAD:
        fields = unpack(view, pos)
        base_offset, batch_length, _, magic, _, _, last_offset_delta = fields[:7]
        size = batch_length + LOG_OVERHEAD
        if (
            base_offset + last_offset_delta >= flushed_until
            or magic != MAGIC
            or size < BATCH_OVERHEAD
            or size > end - pos
            or last_offset_delta < 0
            or base_offset <= last_offset
        ):
            break
        headers.append(header_from(pos, fields))
        last_offset = base_offset + last_offset_delta
        pos += size
    return headers, pos


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    """A zig-zag varint/varlong at `pos` (record fields); returns (value, next position)."""
    result = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
        if shift > 63:
            raise IndexError("varint too long")


# baseOffset, batchLength, partitionLeaderEpoch, magic, crc, attributes, lastOffsetDelta
_PREFIX = struct.Struct(">qiibIhi")
# The header walk reads this much per pread: one read covers index.interval.bytes (4 KiB) of small batches.
_CHUNK = 16 * 1024
# Bound of a tail ring generation for a large index.interval.bytes (4 KiB default: <= ~70 appends).
_RING_MAX = 512
# The ring's generations shift at an index entry once the newer one holds this many appends: with appends
# of index.interval.bytes or more (16 KiB produce batches) every append is indexed, and a ring of one
# append per generation missed a follower's fetch of the last few appends (5 in flight: 5 appends).
_RING_MIN = 16
