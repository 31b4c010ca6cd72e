"""Sparse memory-mapped timestamp index (Kafka `TimeIndex`).

`.timeindex` file: 12-byte big-endian entries `timestamp i64 | relativeOffset i32`, strictly increasing
in timestamp and non-decreasing in offset. An entry says "batches at or after this offset hold the
timestamp": the largest timestamp seen so far and the offset of the batch that carried it. Entries are
added with the offset index entries (every index.interval.bytes) and once more when the segment
becomes inactive (roll/close), so the segment's max timestamp survives a restart.

Same mmap/preallocation/trim rules as offset_index.MappedIndex. The newest entry is also kept in two
attributes (maybe_append runs per index entry on the produce path), reloaded from the file whenever the
entry count moves other than by an append (open, truncate, reset).
"""

from __future__ import annotations

import struct

from kafkad.protocol.errors import ErrorCode, KafkaError
from kafkad.storage.offset_index import IndexFullError, MappedIndex

_I64 = struct.Struct(">q")
_ENTRY_UNPACK_FROM = struct.Struct(">qi").unpack_from
_ENTRY_PACK_INTO = struct.Struct(">qi").pack_into


class TimeIndex(MappedIndex):
    ENTRY_SIZE = 12
    _ENTRY = struct.Struct(">qi")
    _last_ts: int | None  # the newest entry's timestamp (None when empty) and relative offset
    _last_rel: int

    def entry(self, slot: int) -> tuple[int, int]:
        """(timestamp, absolute offset) at `slot`."""
        assert self._mm is not None
        ts, rel = self._ENTRY.unpack_from(self._mm, slot * 12)
        return ts, self.base_offset + rel

    def last_entry(self) -> tuple[int, int]:
        """The newest entry, or (-1, base_offset) when empty (Kafka's `lastEntry`)."""
        return self.entry(self.entries - 1) if self.entries else (-1, self.base_offset)

    def _rel_offset_at(self, slot: int) -> int:
        assert self._mm is not None
        return int(self._ENTRY.unpack_from(self._mm, slot * 12)[1])

    def lookup(self, timestamp: int) -> tuple[int, int]:
        """(timestamp, offset) of the largest entry with timestamp <= `timestamp`, else (-1, base_offset)."""
        slot = self._largest_lower_bound(_I64, 0, timestamp)
        if slot < 0:
            return -1, self.base_offset
        return self.entry(slot)

    def _entries_changed(self) -> None:
        # The newest entry, cached: maybe_append runs per index entry on the produce path.
        if self.entries and self._mm is not None:
            self._last_ts, self._last_rel = _ENTRY_UNPACK_FROM(self._mm, (self.entries - 1) * 12)
        else:
            self._last_ts, self._last_rel = None, 0

    def maybe_append(self, timestamp: int, offset: int, *, skip_full_check: bool = False) -> None:
        """Add (timestamp, offset) if the timestamp is newer than the last entry's."""
        last_ts = self._last_ts
        rel = offset - self.base_offset
        if last_ts is not None:
            if timestamp <= last_ts:
                return
            if rel < self._last_rel:
                raise KafkaError(
                    ErrorCode.KAFKA_STORAGE_ERROR,
                    f"time index offset {offset} < {self.base_offset + self._last_rel}",
                )
        if not 0 <= rel <= 0x7FFFFFFF:
            self._check_relative(offset)  # raises
        n = self.entries
        if n >= self.capacity:
            if skip_full_check:
                self.resize(self.file_length + self.ENTRY_SIZE)
            else:
                raise IndexFullError(str(self.path))
        assert self._mm is not None
        if n * 12 + 12 > self._backed and not self._back(n * 12 + 12):
            return  # a full disk: skipped, as the offset index does (offset_index.py)
        _ENTRY_PACK_INTO(self._mm, n * 12, timestamp, rel)
        self.entries = n + 1
        self._last_ts, self._last_rel = timestamp, rel

    def truncate_to(self, offset: int) -> None:
        """Drop entries with offset >= `offset`."""
        self._truncate_by_offset(offset, 8)

    def sanity_check(self) -> None:
        self._sanity_check_length()
        if self.entries >= 2 and self.entry(self.entries - 1)[0] <= self.entry(self.entries - 2)[0]:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"{self.path}: timestamps do not increase at the end")
