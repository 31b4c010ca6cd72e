"""Transactional compaction: the cleaner drops aborted transactions' data (which never supersedes
committed values), keeps markers while their transaction's data is there, removes them one
delete.retention.ms after that, carries the kept aborts' `.txnindex` entries into the cleaned
segment, and never cleans past the last stable offset."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from kafkad.clock import ManualClock
from kafkad.storage.partition_log import PartitionLog
from kafkad.storage.records import SimpleRecord, build_batch, iter_batches
from kafkad.storage.txn_index import AbortedTxn
from tests.unit.storage.test_cleaner_support import Item, cleaner_for, open_compacted, read_records

A, B, C = 10, 20, 30


class Txn:
    """A transactional producer writing keyed batches to one log."""

    def __init__(self, plog: PartitionLog, clock: ManualClock, pid: int) -> None:
        self.plog, self.clock, self.pid, self.seq = plog, clock, pid, 0

    def send(self, items: Sequence[Item]) -> int:
        raw = build_batch(
            [SimpleRecord(k, v, timestamp=self.clock.time_ms()) for k, v in items],
            producer_id=self.pid,
            producer_epoch=0,
            base_sequence=self.seq,
            is_transactional=True,
        )
        self.seq += len(items)
        r = self.plog.append(memoryview(bytearray(raw)), leader_epoch=0, now_ms=self.clock.time_ms())
        self.plog.high_watermark = self.plog.log_end_offset
        return int(r.base_offset)

    def end(self, commit: bool) -> int:
        offset = self.plog.append_txn_marker(
            self.pid, 0, commit, 0, leader_epoch=0, now_ms=self.clock.time_ms()
        )
        self.plog.high_watermark = self.plog.log_end_offset
        self.clock.advance(1)
        return offset


def plain(plog: PartitionLog, clock: ManualClock, items: Sequence[Item]) -> None:
    raw = build_batch([SimpleRecord(k, v, timestamp=clock.time_ms()) for k, v in items])
    plog.append(memoryview(bytearray(raw)), leader_epoch=0, now_ms=clock.time_ms())
    plog.high_watermark = plog.log_end_offset
    clock.advance(1)


def markers(plog: PartitionLog) -> list[tuple[int, int]]:
    """(producer id, offset) of every control batch in the log."""
    out = []
    for seg in [*plog.cleanable_segments(), (plog.active_segment, plog.log_end_offset)]:
        for batch in iter_batches(seg[0].log_path.read_bytes()):
            if batch.header.is_control:
                out.append((batch.header.producer_id, batch.header.base_offset))
    return out


def values(plog: PartitionLog) -> dict[bytes | None, bytes | None]:
    return {k: v for _, k, v in read_records(plog) if not (k or b"").startswith(b"\x00")}


def test_aborted_data_goes_markers_follow_after_delete_retention(tmp_path: Path) -> None:
    clock = ManualClock()
    plog = open_compacted(tmp_path, clock, overrides={"delete.retention.ms": "60000"})
    a, b = Txn(plog, clock, A), Txn(plog, clock, B)
    b.send([(b"k1", b"b1")])
    commit_b = b.end(True)
    a.send([(b"k1", b"a1"), (b"k2", b"a2")])  # later than b1 but aborted: must not supersede it
    abort_a = a.end(False)
    plain(plog, clock, [(b"k3", b"c3")])
    plog.roll()
    assert plog.aborted_txns(0, plog.log_end_offset) == [AbortedTxn(A, 2, abort_a, abort_a + 1)]

    cleaner = cleaner_for(plog, clock)
    cleaner.clean_all_now()
    assert values(plog) == {b"k1": b"b1", b"k3": b"c3"}
    # Both markers stay: b1 is still there, and a's data went in this very pass (its abort keeps its
    # .txnindex entry in the cleaned segment, which a reopen reads back).
    assert markers(plog) == [(B, commit_b), (A, abort_a)]
    assert plog.aborted_txns(0, plog.log_end_offset) == [AbortedTxn(A, 2, abort_a, abort_a + 1)]
    plog.close()
    plog = open_compacted(tmp_path, clock, overrides={"delete.retention.ms": "60000"})
    assert plog.aborted_txns(0, plog.log_end_offset) == [AbortedTxn(A, 2, abort_a, abort_a + 1)]

    # Next pass (new dirty data): a's data is gone, so its abort gets a delete horizon but stays...
    cleaner = cleaner_for(plog, clock)
    plain(plog, clock, [(b"k3", b"c3'")])
    plog.roll()
    cleaner.clean_all_now()
    assert markers(plog) == [(B, commit_b), (A, abort_a)]
    assert plog.aborted_txns(0, plog.log_end_offset) == []
    # ...until delete.retention.ms later: then the first cleaning removes it.
    clock.advance(60_001)
    cleaner.clean_all_now()
    assert markers(plog) == [(B, commit_b)]
    assert values(plog) == {b"k1": b"b1", b"k3": b"c3'"}


def test_cleaning_stops_at_the_last_stable_offset(tmp_path: Path) -> None:
    clock = ManualClock()
    plog = open_compacted(tmp_path, clock)
    c = Txn(plog, clock, C)
    plain(plog, clock, [(b"k", b"1")])
    plain(plog, clock, [(b"k", b"2")])
    plog.roll()
    start = c.send([(b"k", b"open")])  # an open transaction from here on
    plain(plog, clock, [(b"k", b"3")])
    plog.roll()
    plain(plog, clock, [(b"k", b"4")])
    plog.roll()
    assert plog.last_stable_offset == start
    stats = cleaner_for(plog, clock).clean_all_now()
    assert stats[0].end_offset <= start
    # Only the part below the open transaction was compacted: everything from it on is intact.
    assert [v for o, _, v in read_records(plog) if o >= start] == [b"open", b"3", b"4"]
    assert [v for o, _, v in read_records(plog) if o < start] == [b"2"]
