"""Sparse memory-mapped segment indexes (Kafka `AbstractIndex` / `OffsetIndex`).

`.index` file: 8-byte big-endian entries `relativeOffset i32 | position i32`, strictly increasing in
both. An entry maps the LAST offset of an appended batch set to the file position where that append
started, so "largest entry <= target" always points at or before the batch holding the target.

The file is preallocated to segment.index.bytes (rounded down to the entry size) while the segment is
active and trimmed to its entries on roll/close; the entry count of an existing file is its length
divided by the entry size. There is no checksum: `sanity_check()` catches the usual damage (odd length,
zero-filled preallocated tail) and segments past the recovery point rebuild their indexes anyway.

The preallocated tail is sparse: the first store into one of its pages through the mapping makes the file
system allocate it, and on a full file system (a tmpfs or disk filled to the last block) that store is a
SIGBUS that kills the broker. So an entry that reaches a page not known to be backed first allocates it
with posix_fallocate; when that fails (ENOSPC) the entry is skipped: the index is sparse, a lookup lands on
an earlier entry and walks forward, and the record was already written to the .log (chaos bug 4).

`MappedIndex` holds what both index kinds share (mmap, resize, binary search); `TimeIndex` lives in
time_index.py. Concurrency: runs on the event loop; `fsync()` is blocking and only touches the fd,
so an executor thread may call it while the loop appends or remaps.
"""

from __future__ import annotations

import bisect
import logging
import mmap
import os
import struct
from pathlib import Path
from socket import ntohl

from kafkad.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

_I32 = struct.Struct(">i")
PAGE = mmap.PAGESIZE
_ENTRY_PACK_INTO = struct.Struct(">ii").pack_into
STRIDE = 64  # offset index: one in-memory key per 64 entries (4096 ints for a full 10 MiB index)


class IndexFullError(Exception):
    """Raised by append on a full index; the log rolls before this can happen."""


class MappedIndex:
    ENTRY_SIZE = 8
    KIND = "index"

    def __init__(self, path: Path, base_offset: int, max_index_size: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        length = os.fstat(self._fd).st_size
        if length % self.ENTRY_SIZE:  # torn (or garbage): the mapping needs whole entries
            length = self._round(length)
            os.ftruncate(self._fd, length)
        if length == 0:
            length = self._round(max_index_size)
            os.ftruncate(self._fd, length)
            self.entries = 0
        else:
            self.entries = length // self.ENTRY_SIZE
        self._length = length
        # Entries the file can hold, a plain attribute: the append path tests `entries >= capacity`
        # per append (roll on a full index) without a property call.
        self.capacity = length // self.ENTRY_SIZE
        self._mm: mmap.mmap | None = None
        # Native uint32 view of the mapping: with socket.ntohl it reads big-endian i32 fields about
        # 5x faster than struct.unpack_from on the mmap (lookup is on every fetch).
        self._u32: memoryview | None = None
        # Bytes from the start known to be allocated on disk by our posix_fallocate (0 at open: a file
        # left by a crash may have holes anywhere; allocating an allocated page costs one syscall).
        self._backed = 0
        self._unbacked_warned = False
        self._map(length)
        self._entries_changed()

    def _back(self, end: int) -> bool:
        """Allocate the pages up to byte `end` before the mapping stores there; False on a full disk."""
        start = self._backed
        stop = min(self._length, end + (-end) % PAGE)
        try:
            os.posix_fallocate(self._fd, start, stop - start)
        except OSError as e:
            if not self._unbacked_warned:
                log.warning("%s: no room for index entries (%s): skipping them until there is", self.path, e)
                self._unbacked_warned = True
            return False
        self._backed = stop
        self._unbacked_warned = False
        return True

    def _map(self, length: int) -> None:
        if length:
            self._mm = mmap.mmap(self._fd, length)
            self._u32 = memoryview(self._mm).cast("I")

    def _unmap(self) -> None:
        if self._u32 is not None:
            self._u32.release()
            self._u32 = None
        if self._mm is not None:
            self._mm.close()
            self._mm = None

    def _round(self, size: int) -> int:
        return size - size % self.ENTRY_SIZE

    @property
    def max_entries(self) -> int:
        return self.capacity

    @property
    def is_full(self) -> bool:
        return self.entries >= self.capacity

    @property
    def size_bytes(self) -> int:
        return self.entries * self.ENTRY_SIZE

    @property
    def file_length(self) -> int:
        return self._length

    def _rel_offset_at(self, slot: int) -> int:
        """Relative offset stored in `slot` (subclasses place it differently)."""
        assert self._mm is not None
        return int(_I32.unpack_from(self._mm, slot * self.ENTRY_SIZE)[0])

    def _largest_lower_bound(self, key: struct.Struct, key_at: int, target: int) -> int:
        """Slot of the largest entry whose key (`key` at `key_at` in the entry) <= target, or -1."""
        mm = self._mm
        n = self.entries
        if n == 0 or mm is None:
            return -1
        unpack = key.unpack_from
        size = self.ENTRY_SIZE
        if unpack(mm, key_at)[0] > target:
            return -1
        lo, hi = 0, n - 1
        while lo < hi:
            mid = (lo + hi + 1) >> 1
            if unpack(mm, mid * size + key_at)[0] <= target:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def _check_relative(self, offset: int) -> int:
        rel = offset - self.base_offset
        if not 0 <= rel <= 0x7FFFFFFF:
            raise KafkaError(
                ErrorCode.KAFKA_STORAGE_ERROR, f"offset {offset} not within int32 of base {self.base_offset}"
            )
        return rel

    def _truncate_by_offset(self, offset: int, rel_at: int) -> None:
        # Keep the entries whose offset is < `offset`: the largest slot with rel <= target - 1.
        self.entries = self._largest_lower_bound(_I32, rel_at, offset - self.base_offset - 1) + 1
        self._entries_changed()

    def _entries_changed(self) -> None:
        """Hook run after `entries` moved other than by one append (open, truncate, reset)."""

    def _rel_at(self, slot: int, rel_at: int) -> int:
        assert self._mm is not None
        return int(_I32.unpack_from(self._mm, slot * self.ENTRY_SIZE + rel_at)[0])

    def reset(self) -> None:
        """Forget every entry (before a rebuild)."""
        self.entries = 0
        self._backed = 0
        self._entries_changed()

    def resize(self, new_size: int) -> None:
        """Set the file length (rounded down, never below the entries) and remap it."""
        length = max(self._round(new_size), self.size_bytes)
        if length == self._length:
            return
        self._unmap()  # unmap before shrinking: touching a page past EOF is SIGBUS
        os.ftruncate(self._fd, length)
        self._length = length
        self._backed = min(self._backed, length - length % PAGE)
        self.capacity = length // self.ENTRY_SIZE
        self._map(length)

    def trim(self) -> None:
        self.resize(self.size_bytes)

    def fsync(self) -> None:
        """Blocking: write the mapped pages back (fsync of the fd covers MAP_SHARED pages on Linux)."""
        os.fsync(self._fd)

    def close(self) -> None:
        if self._fd < 0:
            return
        self.trim()
        self._unmap()
        os.close(self._fd)
        self._fd = -1

    def rename(self, path: Path) -> None:
        os.rename(self.path, path)
        self.path = path

    def _sanity_check_length(self) -> None:
        if self._length % self.ENTRY_SIZE:
            raise KafkaError(
                ErrorCode.CORRUPT_MESSAGE, f"{self.path}: length {self._length} is not a multiple"
            )

    def _sanity_check_offsets(self, rel_at: int) -> None:
        # A preallocated file that was never trimmed ends in zero entries: the last two would not increase.
        if self.entries >= 2 and self._rel_at(self.entries - 1, rel_at) <= self._rel_at(
            self.entries - 2, rel_at
        ):
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"{self.path}: entries do not increase at the end")


class OffsetIndex(MappedIndex):
    """offset -> file position; see the module docstring."""

    ENTRY_SIZE = 8
    _ENTRY = struct.Struct(">ii")
    _summary: list[int] | None = None  # every STRIDE-th relative offset, built on first lookup

    def lookup(self, offset: int) -> tuple[int, int]:
        """(offset, position) of the largest entry <= offset, else (base_offset, 0)."""
        v = self._u32
        target = offset - self.base_offset
        if not self.entries or v is None or ntohl(v[0]) > target:
            return self.base_offset, 0
        # bisect (C) over every STRIDE-th relative offset, then a short binary search in the mmap.
        summary = self._summary
        if summary is None:
            summary = self._summary = [ntohl(v[i << 1]) for i in range(0, self.entries, STRIDE)]
        lo = (bisect.bisect_right(summary, target) - 1) * STRIDE
        hi = min(lo + STRIDE, self.entries) - 1
        while lo < hi:
            mid = (lo + hi + 1) >> 1
            if ntohl(v[mid << 1]) <= target:  # relative offsets are < 2**31: unsigned compare is fine
                lo = mid
            else:
                hi = mid - 1
        return self.base_offset + ntohl(v[lo << 1]), ntohl(v[(lo << 1) + 1])

    def upper_bound_offset(self, position: int) -> int | None:
        """Kafka's fetchUpperBoundOffset: the offset of the first entry at or past file `position` (an
        append starting there or later: every offset stored before `position` is below it), None if no
        entry is."""
        slot = self._largest_lower_bound(_I32, 4, position - 1) + 1
        return self.entry(slot)[0] if slot < self.entries else None

    def entry(self, slot: int) -> tuple[int, int]:
        assert self._mm is not None
        rel, pos = self._ENTRY.unpack_from(self._mm, slot * 8)
        return self.base_offset + rel, pos

    @property
    def last_offset(self) -> int:
        return self.entry(self.entries - 1)[0] if self.entries else self.base_offset

    def append(self, offset: int, position: int) -> None:
        rel = offset - self.base_offset
        n = self.entries
        v = self._u32
        # Per index entry on the produce path: one combined test (the last relative offset read
        # through the uint32 view); the error cases are sorted out only when it fails.
        if (
            not 0 <= rel <= 0x7FFFFFFF
            or n >= self.capacity
            or (n and v is not None and rel <= ntohl(v[(n - 1) << 1]))
        ):
            self._check_relative(offset)  # raises if out of range
            if n and v is not None and rel <= ntohl(v[(n - 1) << 1]):
                raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"index append of {offset} is not increasing")
            raise IndexFullError(str(self.path))
        assert self._mm is not None
        if (n << 3) + 8 > self._backed and not self._back((n << 3) + 8):
            return  # a full disk: this entry is skipped (the index is sparse)
        _ENTRY_PACK_INTO(self._mm, n << 3, rel, position)
        if self._summary is not None and not n % STRIDE:
            self._summary.append(rel)
        self.entries = n + 1

    def truncate_to(self, offset: int) -> None:
        """Drop entries with offset >= `offset`."""
        self._truncate_by_offset(offset, 0)
        self._summary = None

    def reset(self) -> None:
        super().reset()
        self._summary = None

    def sanity_check(self) -> None:
        self._sanity_check_length()
        self._sanity_check_offsets(0)
