"""Transactional compaction (Kafka `CleanedTransactionMetadata` in LogCleaner.scala).

The cleaner walks batches in offset order with the aborted transactions of the range (from the
`.txnindex` files, `PartitionLog.aborted_txns`); an aborted transaction becomes "ongoing" at its first
offset and ends at its ABORT marker:
- a transactional data batch of a producer inside an aborted transaction is dropped whole (and never
  enters the offset map, so aborted values never supersede committed ones);
- an ABORT marker is kept, with its `.txnindex` entry in the cleaned segment, while this pass removed
  data of its transaction; otherwise it may go;
- a COMMIT marker is kept while this pass saw data of its transaction; otherwise it may go;
- a marker that may go first gets a delete horizon (now + delete.retention.ms, KIP-534, as tombstones)
  and is removed by the first cleaning after it, so a consumer that read the data before has
  delete.retention.ms to read the marker too.
The cleaner only cleans below the last stable offset, so every transaction it sees is complete.
Blocking callers (the cleaner thread); pure bookkeeping, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable

from kafkad.storage.records import BatchHeader
from kafkad.storage.txn_index import AbortedTxn


class CleanedTxnState:
    def __init__(self, aborted: Iterable[AbortedTxn] = ()) -> None:
        self._pending = sorted(aborted, key=lambda t: t.first_offset)
        self._next = 0
        # producer id -> [its aborted transaction, whether this pass saw a data batch of it]
        self._aborted: dict[int, list[object]] = {}
        self._committed: set[int] = set()
        self.cleaned_index: list[AbortedTxn] = []  # entries for the group being written

    def _start_up_to(self, offset: int) -> None:
        pending = self._pending
        while self._next < len(pending) and pending[self._next].first_offset <= offset:
            txn = pending[self._next]
            self._aborted.setdefault(txn.producer_id, [txn, False])
            self._next += 1

    def on_data_batch(self, header: BatchHeader) -> bool:
        """A data batch was read: True if it belongs to an aborted transaction (drop it)."""
        self._start_up_to(header.base_offset + header.last_offset_delta)
        if not header.is_transactional:
            return False
        entry = self._aborted.get(header.producer_id)
        if entry is not None:
            entry[1] = True
            return True
        self._committed.add(header.producer_id)
        return False

    def on_marker(self, header: BatchHeader, aborted: bool) -> bool:
        """A marker was read: True if it may be removed (once its delete horizon passed)."""
        self._start_up_to(header.base_offset + header.last_offset_delta)
        pid = header.producer_id
        if aborted:
            entry = self._aborted.pop(pid, None)
            if entry is not None and entry[1]:
                txn = entry[0]
                assert isinstance(txn, AbortedTxn)
                self.cleaned_index.append(txn)
                return False
            return True
        if pid in self._committed:
            self._committed.discard(pid)
            return False
        return True
