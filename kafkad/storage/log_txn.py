"""Transactions in a PartitionLog (Kafka's UnifiedLog transaction parts): markers, the last stable
offset, the aborted transactions of a read_committed fetch.

- A marker (COMMIT/ABORT control batch) is appended by the leader for the coordinator
  (`append_marker`), or arrives replicated, or is replayed at load: every path ends in `complete_txn`,
  which updates the producer state and, for an abort, adds the transaction to the `.txnindex` of the
  segment holding the marker, with the LSO right after it (Kafka's `segment.updateTxnIndex`).
- LSO = min(first unstable offset, HW): a read_committed consumer reads up to it.
- `aborted_txns` is Kafka's collectAbortedTxns over the segments from the fetch offset on.

Runs on the event loop (the txn index appends are small writes through the page cache).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from kafkad.storage.log_types import AppendOrigin
from kafkad.storage.records import BatchHeader, ControlRecordType, build_control_batch
from kafkad.storage.records.batch import CONTROL_FLAG, Buffer
from kafkad.storage.records.records import read_marker
from kafkad.storage.txn_index import AbortedTxn

if TYPE_CHECKING:
    from kafkad.storage.log_types import ReadResult
    from kafkad.storage.partition_log import PartitionLog
    from kafkad.storage.segment import LogSegment

# A control batch is one small record (61-byte header + ~20 bytes): one pread reads all of it.
_MARKER_READ = 128


def append_marker(
    plog: PartitionLog,
    producer_id: int,
    producer_epoch: int,
    committed: bool,
    coordinator_epoch: int,
    *,
    leader_epoch: int,
    now_ms: int,
) -> int:
    """Append a marker as the leader (the coordinator's write); its offset. Raises KafkaError
    (INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED) before appending anything."""
    plog.producer_state.check_marker(producer_id, producer_epoch, coordinator_epoch)
    batch = build_control_batch(
        ControlRecordType.COMMIT if committed else ControlRecordType.ABORT,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        coordinator_epoch=coordinator_epoch,
        timestamp=now_ms,
    )
    result = plog.append(
        memoryview(bytearray(batch)),
        leader_epoch=leader_epoch,
        now_ms=now_ms,
        origin=AppendOrigin.COORDINATOR,
    )
    return int(result.last_offset)


def record_producer_batch(plog: PartitionLog, buf: Buffer, h: BatchHeader, base_offset: int, ts: int) -> None:
    """The producer-state update of an appended batch of a producer (`h.position` is in `buf`)."""
    if h.attributes & CONTROL_FLAG:
        aborted, coordinator_epoch = read_marker(buf, h.position)
        complete_txn(plog, h.producer_id, h.producer_epoch, coordinator_epoch, base_offset, aborted, ts)
    else:
        plog.producer_state.update(h, base_offset, ts)


def replay_batch(plog: PartitionLog, h: BatchHeader) -> None:
    """Load: the producer-state update of a stored batch (a marker's record is read from its segment)."""
    if not h.attributes & CONTROL_FLAG:
        plog.producer_state.update(h, h.base_offset, h.max_timestamp)
        return
    _, seg, _ = plog.segments.locate(h.base_offset)
    raw = os.pread(seg.fd, _MARKER_READ, h.position)
    aborted, coordinator_epoch = read_marker(raw, 0)
    complete_txn(
        plog, h.producer_id, h.producer_epoch, coordinator_epoch, h.base_offset, aborted, h.max_timestamp, seg
    )


def complete_txn(
    plog: PartitionLog,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    offset: int,
    aborted: bool,
    timestamp: int,
    segment: LogSegment | None = None,
) -> None:
    completed, lso = plog.producer_state.record_marker(
        producer_id, producer_epoch, coordinator_epoch, offset, aborted, timestamp
    )
    if completed is not None and aborted:
        seg = segment if segment is not None else plog.active_segment
        seg.txn_index.append(AbortedTxn(producer_id, completed.first_offset, offset, lso))
        plog.txn_aborts = True


def _may_have_aborts(plog: PartitionLog) -> bool:
    """Whether any segment may hold an abort (a log that never had one answers every read_committed
    fetch without looking at its segments): learnt once per opened log, then kept by complete_txn."""
    known = plog.txn_aborts
    if known is None:
        known = plog.txn_aborts = any(seg.txn_index.entries for seg in plog.segments)
    return known


def last_stable_offset(plog: PartitionLog) -> int:
    """min(first unstable offset, HW), never below the log start."""
    hw = plog.high_watermark
    first = plog.producer_state.first_unstable_offset(hw)
    if first is None or first >= hw:
        return hw
    return max(first, plog.log_start_offset)


def aborted_txns(plog: PartitionLog, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
    """The aborted transactions overlapping [fetch_offset, upper_bound) (Kafka's collectAbortedTxns:
    segments from the one holding `fetch_offset` on, until an entry's LSO reaches `upper_bound`)."""
    out: list[AbortedTxn] = []
    for seg in plog.segments.from_offset(fetch_offset):
        found, complete = seg.txn_index.collect(fetch_offset, upper_bound)
        out.extend(found)
        if complete:
            break
    return out


def aborted_txns_for_read(
    plog: PartitionLog, fetch_offset: int, result: ReadResult, limit: int
) -> list[AbortedTxn]:
    """`aborted_txns` for a read_committed read that returned `result` from `fetch_offset`: only the
    aborts overlapping what it read (Kafka's upper bound, fetchUpperBoundOffset: the offset of the first
    offset-index entry past the read, else the segment's end), bounded by `limit` (the LSO). Costs nothing more
    than a look at each later segment's index when no abort follows the fetch offset."""
    if not result.slices or not _may_have_aborts(plog):
        return []
    segments = plog.segments.from_offset(fetch_offset)
    if all(seg.txn_index.last_offset < fetch_offset for seg in segments):
        return []
    piece = result.slices[-1]
    end = piece.position + piece.size
    upper = limit
    for i, seg in enumerate(segments):
        if seg.fd == piece.fd:  # the read may end inside a batch (max_bytes): the offset index bounds it
            found = seg.offset_index.upper_bound_offset(end)
            if found is not None:
                upper = found
            elif i + 1 < len(segments):
                upper = segments[i + 1].base_offset
            break
    return aborted_txns(plog, fetch_offset, min(upper, limit))
