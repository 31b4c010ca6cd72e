"""The clean-start check of an active segment: the clean-shutdown marker is a hint, not a proof.

A filesystem may keep the marker (and the file size) but not the data written before it: bytes
appended past the last batch, a batch cut short, a zeroed tail, an index that no longer matches the
`.log`. `verify_tail` looks only at what is cheap and decisive, so a clean start of many partitions
stays fast:
- the batch headers after the last offset index entry (<= index.interval.bytes of batches, read in
  64 KiB preads; the same walk the log needs anyway to find its log end offset) must be sane (magic 2,
  a plausible length, offsets increasing inside the segment) and end exactly at the file size;
- the last entries of the offset and time indexes must point inside what the walk found;
- the last batch must pass its CRC-32C (one batch; for one larger than 1 MiB only its last 4 KiB are
  checked for the zeros a lost write leaves).
Any failure raises KafkaError(CORRUPT_MESSAGE) naming the file and the position; the loader then
recovers the segment (CRC scan, truncation to the last whole batch) with a WARNING.
Blocking (preads): called by the loader in its executor thread.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, NoReturn

from kafkad.protocol.errors import ErrorCode, KafkaError
from kafkad.storage.crc import crc32c
from kafkad.storage.records.batch import ATTRIBUTES_OFFSET, BATCH_OVERHEAD, HEADER_STRUCT, LOG_OVERHEAD, MAGIC

if TYPE_CHECKING:
    from kafkad.storage.segment import LogSegment

_READ = 64 * 1024  # one pread covers the usual walk (index.interval.bytes 4 KiB plus a batch)
_CRC_MAX = 1024 * 1024  # the last batch is CRC-checked up to this size
_ZERO_PROBE = 4096  # larger last batches: their last block must not be all zeros
_INT32_MAX = 0x7FFFFFFF


def verify_tail(seg: LogSegment) -> int:
    """Blocking: check the segment's tail (module docstring); returns the offset after its last batch.

    Also folds the walked batches' max timestamp into the segment, as `read_next_offset` does.
    """
    oi, ti = seg.offset_index, seg.time_index
    end = seg.size
    indexed_offset, start = oi.entry(oi.entries - 1) if oi.entries else (seg.base_offset, 0)
    if start >= max(end, 1) and oi.entries:
        _corrupt(oi.path, f"last entry points at {start}, past the log end {end}")
    fd = seg.fd
    unpack = HEADER_STRUCT.unpack_from
    next_offset = seg.base_offset
    first_last: int | None = None  # last offset of the first walked batch (the index entry's append)
    last: tuple[int, int, int] | None = None  # (position, size, crc) of the last batch
    buf = b""
    buf_at = position = start
    while position < end:
        at = position - buf_at
        if at + BATCH_OVERHEAD > len(buf):
            buf, buf_at, at = os.pread(fd, min(_READ, end - position), position), position, 0
            if len(buf) < BATCH_OVERHEAD:
                _corrupt(seg.log_path, f"{end - position} bytes at {position} are not a batch header")
        base, length, _, magic, crc, _, last_delta, _, max_ts = unpack(buf, at)[:9]
        size = length + LOG_OVERHEAD
        last_offset = base + last_delta
        if magic != MAGIC or size < BATCH_OVERHEAD or last_delta < 0:
            _corrupt(seg.log_path, f"no batch header at {position} (magic {magic}, length {length})")
        if base < next_offset or last_offset - seg.base_offset > _INT32_MAX:
            _corrupt(seg.log_path, f"batch at {position} has offsets {base}..{last_offset} out of order")
        if position + size > end:
            _corrupt(seg.log_path, f"batch at {position} of {size} bytes ends past the file size {end}")
        if first_last is None:
            first_last = last_offset
        if max_ts > seg.max_timestamp:
            seg.max_timestamp, seg.offset_of_max_timestamp = max_ts, base
        next_offset = last_offset + 1
        last = (position, size, crc)
        position += size
    if oi.entries and (first_last is None or not first_last <= indexed_offset < next_offset):
        _corrupt(oi.path, f"last entry (offset {indexed_offset}) disagrees with the log (end {next_offset})")
    if ti.entries and ti.last_entry()[1] >= max(next_offset, seg.base_offset + 1):
        _corrupt(ti.path, f"last entry (offset {ti.last_entry()[1]}) is past the log end {next_offset}")
    if last is not None:
        _check_last_batch(seg, last, buf, buf_at)
    return next_offset


def _check_last_batch(seg: LogSegment, last: tuple[int, int, int], buf: bytes, buf_at: int) -> None:
    position, size, crc = last
    if size > _CRC_MAX:
        probe = os.pread(seg.fd, _ZERO_PROBE, position + size - _ZERO_PROBE)
        if probe.count(0) == len(probe):
            _corrupt(seg.log_path, f"batch at {position} ends in {_ZERO_PROBE} zero bytes")
        return
    at = position - buf_at
    if at + size <= len(buf):
        data = memoryview(buf)[at + ATTRIBUTES_OFFSET : at + size]
    else:
        data = memoryview(os.pread(seg.fd, size - ATTRIBUTES_OFFSET, position + ATTRIBUTES_OFFSET))
    if len(data) != size - ATTRIBUTES_OFFSET or crc32c(data) != crc:
        _corrupt(seg.log_path, f"last batch at {position} fails its CRC")


def _corrupt(path: os.PathLike[str], what: str) -> NoReturn:
    raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"{path}: {what}")
