"""The aborted-transaction index of a segment (Kafka `TransactionIndex`, `<base offset>.txnindex`).

One 34-byte big-endian entry per transaction aborted by a marker in this segment, in marker order
(Kafka's `AbortedTxn`, version 0)::

    version i16 (0) | producerId i64 | firstOffset i64 | lastOffset i64 | lastStableOffset i64

firstOffset is the transaction's first data offset (possibly in an older segment), lastOffset the
ABORT marker's offset, lastStableOffset the partition's LSO right after the abort (the first offset of
another producer's ongoing transaction, else lastOffset + 1): a read_committed fetch that ends below it
need not look into later segments (`collect`).

The file is created at the first abort only (most segments never have one, and no file is opened
while a partition loads); its entries are read once and kept in memory (a handful per segment), so
read_committed fetches never touch the disk for it. A torn tail (a partial entry after a crash) is cut
off at load. Runs on the event loop: appends are one small write through the page cache, as the
segment's own; `fsync` and `destroy` are blocking.
"""

from __future__ import annotations

import logging
import os
import struct
from bisect import bisect_left
from operator import attrgetter
from pathlib import Path
from typing import NamedTuple

from kafkad.storage.checkpoints import remove_quietly

log = logging.getLogger(__name__)

TXN_INDEX_SUFFIX = ".txnindex"
VERSION = 0
_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size  # 34


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def encode(self) -> bytes:
        return _ENTRY.pack(VERSION, *self)


_last_offset = attrgetter("last_offset")


def decode_entries(data: bytes) -> list[AbortedTxn]:
    """The whole entries of `data` (a partial trailing entry is ignored)."""
    whole = len(data) - len(data) % ENTRY_SIZE
    return [AbortedTxn(*fields[1:]) for fields in _ENTRY.iter_unpack(data[:whole])]


class TransactionIndex:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._entries: list[AbortedTxn] | None = None  # loaded at first use

    @property
    def entries(self) -> list[AbortedTxn]:
        if self._entries is None:
            try:
                data = self.path.read_bytes()
            except FileNotFoundError:
                data = b""
            self._entries = decode_entries(data)
            if len(data) % ENTRY_SIZE:  # torn by a crash mid-append: keep the whole entries
                log.warning("%s: cutting off a partial entry", self.path)
                os.truncate(self.path, len(self._entries) * ENTRY_SIZE)
        return self._entries

    @property
    def last_offset(self) -> int:
        entries = self.entries
        return entries[-1].last_offset if entries else -1

    def append(self, txn: AbortedTxn) -> None:
        """Add an abort; one whose marker is not after the last one's is ignored (a replay that
        re-derives an entry already written: Kafka raises, which would make a rebuild fail)."""
        entries = self.entries
        if entries and txn.last_offset <= entries[-1].last_offset:
            return
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, txn.encode())
        finally:
            os.close(fd)
        entries.append(txn)

    def collect(self, fetch_offset: int, upper_bound: int) -> tuple[list[AbortedTxn], bool]:
        """Kafka's collectAbortedTxns: the aborts overlapping [fetch_offset, upper_bound), and whether
        the search is complete (an entry's LSO reached `upper_bound`: later segments cannot matter).

        Entries whose marker is below `fetch_offset` are skipped by bisection: such an entry can neither
        overlap the range nor complete the search (its LSO is its marker + 1, or the first offset of a
        transaction open before its marker: either way below `fetch_offset`), so a consumer catching up
        through a segment with many aborts does not rescan them at every fetch."""
        out = []
        entries = self.entries
        start = bisect_left(entries, fetch_offset, key=_last_offset)
        for i in range(start, len(entries)):
            txn = entries[i]
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound:
                out.append(txn)
            if txn.last_stable_offset >= upper_bound:
                return out, True
        return out, False

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose marker is at or after `offset` (a log truncation)."""
        entries = self.entries
        keep = [t for t in entries if t.last_offset < offset]
        if len(keep) != len(entries):
            self._rewrite(keep)

    def reset(self) -> None:
        """Forget every entry (the segment is being recovered: they are derived again)."""
        if self.entries:
            self._rewrite([])

    def _rewrite(self, entries: list[AbortedTxn]) -> None:
        if entries:
            os.truncate(self.path, len(entries) * ENTRY_SIZE)  # entries kept are always a prefix
        else:
            remove_quietly(self.path)
        self._entries = entries

    def rename(self, path: Path) -> None:
        if os.path.exists(self.path):
            os.rename(self.path, path)
        self.path = path

    def fsync(self) -> None:
        """Blocking."""
        if self._entries:
            fd = os.open(self.path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def destroy(self) -> None:
        """Blocking: remove the file."""
        remove_quietly(self.path)
        self._entries = []
