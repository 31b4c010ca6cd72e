"""The log cleaner's blocking work (Kafka `Cleaner`): offset map, then one rewritten segment per group.

Offset map (Kafka `SkimpyOffsetMap`, here a dict key -> last offset): built over the dirty section,
whole segments only, stopping before the segment that would overflow `max_map_entries` (at least one
segment is always mapped, so the cleaner always makes progress).

Rewrite (Kafka `cleanInto` + `MemoryRecords.filterTo`), batch by batch, records kept when:
- the record has a key (keyless records cannot be compacted: Kafka drops them too);
- its offset >= the map's offset for its key (keys absent from the map are kept);
- it is not a tombstone (null value) whose batch's delete horizon has passed.
A batch whose records all survive and that needs no new delete horizon is copied byte for byte.
Otherwise it is rebuilt with the same base offset, offset deltas (gaps stay), producer id/epoch, base
sequence, leader epoch, attributes and codec; a batch that still holds tombstones gets Kafka's delete
horizon (attributes bit 6, baseTimestamp = now + delete.retention.ms, KIP-534) the first time it is
cleaned, and its tombstones are dropped by the first cleaning after that horizon. Control batches
(transaction markers) follow cleaner_txn: data of aborted transactions goes, markers go after their
delete horizon once their transaction's data is gone.

Output of a group: `<base>.log.cleaned`, `<base>.index.cleaned`, `<base>.timeindex.cleaned` (indexes
built with the segment index rule, trimmed) and `<base>.range.cleaned` (the group's end offset, which
swap recovery needs), all fsynced. `cleaner_swap` commits them.

Undecodable batches (corrupt compressed data, a decompression bomb past codecs.MAX_DECOMPRESSED_BYTES,
record framing that cannot be walked) are never dropped: the offset map skips them (so the records their
keys would supersede are kept) and the rewrite copies them byte for byte, with a WARNING each time.

Segments are read with os.pread in chunks (never mmap: a follower truncation could shrink a file under
the mapping). Blocking: runs in an executor thread.
"""

from __future__ import annotations

import contextlib
import logging
import os
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from kafkad.protocol.errors import KafkaError
from kafkad.storage.cleaner_txn import CleanedTxnState
from kafkad.storage.crc import crc32c
from kafkad.storage.offset_index import OffsetIndex
from kafkad.storage.records import BATCH_OVERHEAD, BatchHeader, Record, decode_batch, read_header
from kafkad.storage.records.batch import (
    ATTRIBUTES_OFFSET,
    CRC_OFFSET,
    DELETE_HORIZON_FLAG,
    HEADER_STRUCT,
    LOG_OVERHEAD,
    MAGIC,
)
from kafkad.storage.records.builder import encode_record
from kafkad.storage.records.codecs import compress, decompress
from kafkad.storage.records.records import read_marker
from kafkad.storage.records.varint import read_varint
from kafkad.storage.segment import INDEX_SUFFIX, INT32_MAX, LOG_SUFFIX, TIME_INDEX_SUFFIX, file_stem
from kafkad.storage.time_index import TimeIndex
from kafkad.storage.txn_index import TXN_INDEX_SUFFIX, AbortedTxn

CLEANED_SUFFIX = ".cleaned"
RANGE_SUFFIX = ".range"
_READ_CHUNK = 8 * 1024 * 1024
_UINT32 = struct.Struct(">I")

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Piece:
    """One closed segment as the cleaner sees it: the segment object and the next segment's base."""

    segment: object  # a LogSegment; kept opaque so the swap can check identity
    fd: int
    base_offset: int
    next_offset: int
    size: int
    index_bytes: int  # bytes of its offset index entries (groups must fit one index)


@dataclass(frozen=True, slots=True)
class OffsetMapResult:
    offsets: dict[bytes, int]
    end_offset: int  # first offset NOT mapped: the next first-dirty offset
    mapped_bytes: int
    mapped_records: int


@dataclass(frozen=True, slots=True)
class CleanedGroup:
    """A group's cleaned files, ready to swap in place of `pieces`."""

    directory: Path
    base_offset: int
    end_offset: int  # next offset after the group (base of the following segment)
    pieces: tuple[Piece, ...]
    size: int  # bytes of the new .log
    records_read: int
    records_kept: int
    min_delete_horizon: int | None  # earliest delete horizon of a batch still holding tombstones
    # The dirty segments the offset map came from: the swap is valid only while they are intact (a
    # truncation that removed them would make the map drop values that are now the latest).
    mapped: tuple[Piece, ...] = ()


@dataclass(frozen=True, slots=True)
class RewriteRules:
    now_ms: int
    delete_retention_ms: int
    index_interval_bytes: int
    index_bytes: int


def iter_segment_batches(fd: int, size: int) -> Iterator[tuple[BatchHeader, memoryview]]:
    """Every complete batch of the first `size` bytes of a segment file, read in chunks."""
    pos = 0
    buf = b""
    start = 0  # file position of buf[0]
    while True:
        view = memoryview(buf)
        off = pos - start
        while len(buf) - off >= BATCH_OVERHEAD:
            header = read_header(view, off)
            if header.size < BATCH_OVERHEAD or off + header.size > len(buf):
                break
            yield header, view[off : off + header.size]
            off += header.size
            pos += header.size
        if pos >= size:
            return
        want = max(_READ_CHUNK, (read_header(view, off).size if len(buf) - off >= BATCH_OVERHEAD else 0))
        chunk = os.pread(fd, min(want, size - pos), pos)
        if not chunk:
            return  # the file shrank under us: the swap will notice and give up
        buf = bytes(view[off:]) + chunk
        start = pos


def _scan_or_none(header: BatchHeader, batch: memoryview) -> list[tuple[bytes | None, int, bool]] | None:
    """`_scan_records`, or None (with a WARNING) for a batch that cannot be decoded: the caller keeps it."""
    try:
        return _scan_records(header, batch)
    except (KafkaError, IndexError) as exc:  # IndexError: record framing running past the blob
        log.warning(
            "log cleaner: batch at offsets %d-%d cannot be decoded, kept as is: %s",
            header.base_offset,
            header.last_offset,
            exc,
        )
        return None


def _scan_records(header: BatchHeader, batch: memoryview) -> list[tuple[bytes | None, int, bool]]:
    """(key, offset, is tombstone) of every record: only the record prefixes are parsed, values are
    skipped (the common superseded batch is dropped without a full decode)."""
    data = decompress(header.compression, batch[BATCH_OVERHEAD:])
    pos = 0
    base = header.base_offset
    out: list[tuple[bytes | None, int, bool]] = []
    append = out.append
    # Hot loop (~5 varints per record): single-byte varints inline, longer ones via read_varint.
    for _ in range(header.records_count):
        length, pos = read_varint(data, pos)
        end = pos + length
        p = pos + 1  # attributes
        while data[p] & 0x80:  # timestamp delta: skipped
            p += 1
        b = data[p + 1]
        if b < 0x80:
            delta, p = (b >> 1) ^ -(b & 1), p + 2
        else:
            delta, p = read_varint(data, p + 1)
        b = data[p]
        if b < 0x80:
            key_len, p = (b >> 1) ^ -(b & 1), p + 1
        else:
            key_len, p = read_varint(data, p)
        key = None
        if key_len >= 0:
            key = data[p : p + key_len]
            p += key_len
        # A null value is the varint -1: the single byte 0x01.
        append((key, base + delta, data[p] == 1))
        pos = end
    return out


def build_offset_map(
    pieces: Sequence[Piece], max_entries: int, aborted: Sequence[AbortedTxn] = ()
) -> OffsetMapResult:
    """Key -> last offset over whole `pieces` (the dirty section), stopping before overflowing; batches
    of the `aborted` transactions are left out (cleaner_txn)."""
    txn = CleanedTxnState(aborted)
    offsets: dict[bytes, int] = {}
    end = pieces[0].base_offset if pieces else 0
    mapped_bytes = mapped_records = 0
    for i, piece in enumerate(pieces):
        if i > 0 and len(offsets) >= max_entries:
            break
        seg_map: dict[bytes, int] = {}
        n = 0
        for header, batch in iter_segment_batches(piece.fd, piece.size):
            if header.is_control:
                _marker(txn, header, batch)
                continue
            if txn.on_data_batch(header):
                continue
            for key, offset, _ in _scan_or_none(header, batch) or ():
                n += 1
                if key is not None:
                    seg_map[key] = offset
        if i > 0 and len(offsets.keys() | seg_map.keys()) > max_entries:
            break
        offsets.update(seg_map)
        end = piece.next_offset
        mapped_bytes += piece.size
        mapped_records += n
    return OffsetMapResult(offsets, end, mapped_bytes, mapped_records)


def group_pieces(pieces: Sequence[Piece], max_bytes: int, max_index_bytes: int) -> list[list[Piece]]:
    """Consecutive pieces merged while the sum fits one segment (Kafka `groupSegmentsBySize`)."""
    groups: list[list[Piece]] = []
    for piece in pieces:
        if groups:
            g = groups[-1]
            if (
                sum(p.size for p in g) + piece.size <= max_bytes
                and sum(p.index_bytes for p in g) + piece.index_bytes <= max_index_bytes
                and piece.next_offset - 1 - g[0].base_offset <= INT32_MAX
            ):
                g.append(piece)
                continue
        groups.append([piece])
    return groups


def cleaned_paths(directory: Path, base_offset: int) -> tuple[Path, Path, Path, Path]:
    """(.log, .index, .timeindex, .range) of a group's cleaned output, `.cleaned` suffixed."""
    stem = file_stem(base_offset)
    return (
        directory / (stem + LOG_SUFFIX + CLEANED_SUFFIX),
        directory / (stem + INDEX_SUFFIX + CLEANED_SUFFIX),
        directory / (stem + TIME_INDEX_SUFFIX + CLEANED_SUFFIX),
        directory / (stem + RANGE_SUFFIX + CLEANED_SUFFIX),
    )


def txn_index_cleaned_path(directory: Path, base_offset: int) -> Path:
    """The `.txnindex` of a group's cleaned output (written only when it has entries)."""
    return directory / (file_stem(base_offset) + TXN_INDEX_SUFFIX + CLEANED_SUFFIX)


def _rebuild(header: BatchHeader, records: list[Record], horizon: int | None) -> bytes:
    """A batch with `records` (a subset of the original's), same base offset, codec and producer."""
    base_ts = horizon if horizon is not None else records[0].timestamp
    attributes = header.attributes & ~DELETE_HORIZON_FLAG
    if horizon is not None:
        attributes |= DELETE_HORIZON_FLAG
    base = header.base_offset
    data = b"".join(encode_record(r, r.offset - base, base_ts) for r in records)
    payload = compress(header.compression, data)
    size = BATCH_OVERHEAD + len(payload)
    out = bytearray(size)
    HEADER_STRUCT.pack_into(
        out,
        0,
        base,
        size - LOG_OVERHEAD,
        header.partition_leader_epoch,
        MAGIC,
        0,
        attributes,
        records[-1].offset - base,
        base_ts,
        max(r.timestamp for r in records),
        header.producer_id,
        header.producer_epoch,
        header.base_sequence,
        len(records),
    )
    out[BATCH_OVERHEAD:] = payload
    _UINT32.pack_into(out, CRC_OFFSET, crc32c(memoryview(out)[ATTRIBUTES_OFFSET:]))
    return bytes(out)


def _marker(txn: CleanedTxnState, header: BatchHeader, batch: memoryview) -> bool:
    """`txn.on_marker` for a control batch; False (keep it) for one that is not a readable marker."""
    try:
        aborted, _ = read_marker(batch, 0)
    except KafkaError:
        return False
    return txn.on_marker(header, aborted)


def _filter_marker(
    header: BatchHeader, batch: memoryview, rules: RewriteRules, txn: CleanedTxnState | None
) -> tuple[bytes | memoryview | None, int, int | None]:
    """A control batch: kept while its transaction's data is (cleaner_txn); then it gets a delete
    horizon, and is dropped by the first cleaning after it."""
    if txn is None or not _marker(txn, header, batch):
        return batch, header.records_count, None
    if header.has_delete_horizon:
        if rules.now_ms >= header.base_timestamp:
            return None, 0, None
        return batch, header.records_count, header.base_timestamp
    horizon = rules.now_ms + rules.delete_retention_ms
    return _rebuild(header, decode_batch(batch).records, horizon), header.records_count, horizon


def filter_batch(
    header: BatchHeader,
    batch: memoryview,
    offsets: dict[bytes, int],
    rules: RewriteRules,
    txn: CleanedTxnState | None = None,
) -> tuple[bytes | memoryview | None, int, int | None]:
    """(the batch to write or None, records kept, its delete horizon if it still holds tombstones or is
    a marker due for removal)."""
    if header.is_control:
        return _filter_marker(header, batch, rules, txn)
    if txn is not None and txn.on_data_batch(header):
        return None, 0, None  # an aborted transaction's
    old_horizon = header.base_timestamp if header.has_delete_horizon else None
    drop_tombstones = old_horizon is not None and rules.now_ms >= old_horizon
    scanned = _scan_or_none(header, batch)
    if scanned is None:
        return batch, header.records_count, old_horizon
    keep: list[int] = []
    tombstones = False
    for i, (key, offset, tombstone) in enumerate(scanned):
        if key is None or offset < offsets.get(key, -1):
            continue
        if tombstone:
            if drop_tombstones:
                continue
            tombstones = True
        keep.append(i)
    if not keep:
        return None, 0, None
    horizon = None
    if tombstones:
        horizon = rules.now_ms + rules.delete_retention_ms if old_horizon is None else old_horizon
    if len(keep) == len(scanned) and horizon == old_horizon:
        return batch, len(keep), horizon
    records = decode_batch(batch).records
    kept: list[Record] = [records[i] for i in keep]
    return _rebuild(header, kept, horizon), len(kept), horizon


def write_cleaned_group(
    directory: Path,
    group: Sequence[Piece],
    offsets: dict[bytes, int],
    rules: RewriteRules,
    mapped: Sequence[Piece] = (),
    txn: CleanedTxnState | None = None,
) -> CleanedGroup:
    """Blocking: rewrite `group` into its `.cleaned` files (fsynced) and describe the result. `txn`:
    the cleaning's transaction state (kept across its groups); the aborted transactions whose markers
    this group keeps go to its cleaned `.txnindex`."""
    if txn is not None:
        txn.cleaned_index = []
    base = group[0].base_offset
    log_path, index_path, time_path, range_path = cleaned_paths(directory, base)
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    offset_index = OffsetIndex(index_path, base, rules.index_bytes)
    time_index = TimeIndex(time_path, base, rules.index_bytes)
    position = since_index = 0
    max_ts, offset_of_max_ts = -1, base
    read = kept = 0
    min_horizon: int | None = None
    out: list[bytes | memoryview] = []
    pending = 0
    try:
        for piece in group:
            for header, batch in iter_segment_batches(piece.fd, piece.size):
                read += header.records_count
                new, n, horizon = filter_batch(header, batch, offsets, rules, txn)
                if new is None:
                    continue
                kept += n
                if horizon is not None:
                    min_horizon = horizon if min_horizon is None else min(min_horizon, horizon)
                new_header = read_header(new)
                if new_header.max_timestamp > max_ts:
                    max_ts, offset_of_max_ts = new_header.max_timestamp, new_header.base_offset
                if since_index > rules.index_interval_bytes:
                    offset_index.append(new_header.last_offset, position)
                    if max_ts >= 0:
                        time_index.maybe_append(max_ts, offset_of_max_ts)
                    since_index = 0
                since_index += len(new)
                position += len(new)
                out.append(new)
                pending += len(new)
                if pending >= _READ_CHUNK:
                    _write_all(fd, out)
                    out, pending = [], 0
        _write_all(fd, out)
        if max_ts >= 0:
            time_index.maybe_append(max_ts, offset_of_max_ts, skip_full_check=True)
        offset_index.trim()
        time_index.trim()
        os.fsync(fd)
        offset_index.fsync()
        time_index.fsync()
    finally:
        os.close(fd)
        offset_index.close()
        time_index.close()
    if txn is not None and txn.cleaned_index:
        _write_small(txn_index_cleaned_path(directory, base), b"".join(t.encode() for t in txn.cleaned_index))
    end = group[-1].next_offset
    _write_small(range_path, f"{end}\n".encode())
    return CleanedGroup(directory, base, end, tuple(group), position, read, kept, min_horizon, tuple(mapped))


def _write_all(fd: int, parts: list[bytes | memoryview]) -> None:
    for part in parts:
        view = memoryview(part)
        while view:
            view = view[os.write(fd, view) :]


def _write_small(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def discard_cleaned(directory: Path, base_offset: int) -> None:
    """Blocking: remove a group's `.cleaned` files (an aborted or refused swap).

    The range file stays if the swap was committed (`.log.swap` exists): recovery needs it.
    """
    paths = [txn_index_cleaned_path(directory, base_offset), *cleaned_paths(directory, base_offset)]
    if (directory / (file_stem(base_offset) + LOG_SUFFIX + ".swap")).exists():
        paths.pop()
    for path in paths:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
