"""The partition side of transactions in storage: markers, the last stable offset, `.txnindex` in
Kafka's format (written at an abort, truncated with the log, rebuilt by recovery), producer state with
ongoing transactions across snapshots and restarts, and the producer checks of a transactional append."""

from __future__ import annotations

from pathlib import Path

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from kafkad.clock import ManualClock
from kafkad.protocol.errors import ErrorCode, KafkaError
from kafkad.storage.partition_log import AppendOrigin, PartitionLog
from kafkad.storage.producer_state import ProducerEntry, decode_snapshot, encode_snapshot
from kafkad.storage.records import ControlRecordType, build_control_batch, decode_batch
from kafkad.storage.txn_index import AbortedTxn, TransactionIndex
from tests.unit.storage.test_partition_log_helpers import open_log

A, B, C = 1000, 2000, 3000
SMALL = {"segment.bytes": "1024"}


def txn_batch(pid: int, seq: int, count: int = 2, epoch: int = 0, *, transactional: bool = True) -> bytearray:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=int(transactional),
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        batch_size=1 << 30,
    )
    for i in range(count):
        builder.append(i, timestamp=1_700_000_000_000 + i, key=None, value=b"v%d" % (seq + i), headers=[])
    return bytearray(builder.build())


def produce(log: PartitionLog, pid: int, seq: int, count: int = 2, epoch: int = 0) -> tuple[int, int]:
    r = log.append(memoryview(txn_batch(pid, seq, count, epoch)), leader_epoch=0, now_ms=0)
    return r.base_offset, r.last_offset


def end(log: PartitionLog, pid: int, *, commit: bool, epoch: int = 0, coordinator_epoch: int = 0) -> int:
    offset = log.append_txn_marker(pid, epoch, commit, coordinator_epoch, leader_epoch=0, now_ms=5)
    log.high_watermark = log.log_end_offset  # a standalone leader: the HW follows the append
    return offset


def test_aborted_txn_entry_is_kafkas_34_byte_layout(tmp_path: Path) -> None:
    # Kafka's AbortedTxn: version i16 = 0, producerId, firstOffset, lastOffset, lastStableOffset (i64 BE)
    expected = bytes.fromhex("000000000000000003e8000000000000000000000000000000040000000000000002")
    assert AbortedTxn(A, 0, 4, 2).encode() == expected
    log = open_log(tmp_path, ManualClock())
    produce(log, A, 0)  # 0-1
    produce(log, B, 0)  # 2-3, ongoing when A aborts: A's entry's LSO is B's first offset
    assert end(log, A, commit=False) == 4
    path = tmp_path / "t-0" / "00000000000000000000.txnindex"
    assert path.read_bytes() == expected
    assert TransactionIndex(path).entries == [AbortedTxn(A, 0, 4, 2)]


def test_last_stable_offset_follows_open_and_unreplicated_transactions(tmp_path: Path) -> None:
    log = open_log(tmp_path, ManualClock())
    produce(log, A, 0)  # 0-1 open
    log.append(memoryview(txn_batch(C, 0, 1, transactional=False)), leader_epoch=0, now_ms=0)  # 2
    log.high_watermark = log.log_end_offset
    assert (log.high_watermark, log.last_stable_offset) == (3, 0)
    offset = log.append_txn_marker(A, 0, True, 0, leader_epoch=0, now_ms=5)
    assert offset == 3
    assert log.last_stable_offset == 0  # committed but the HW has not passed the marker yet
    log.high_watermark = 4
    assert log.last_stable_offset == 4
    assert log.aborted_txns(0, 4) == []  # a commit leaves no index entry
    assert not (tmp_path / "t-0" / "00000000000000000000.txnindex").exists()


def test_aborted_txns_cover_the_fetch_range_only(tmp_path: Path) -> None:
    log = open_log(tmp_path, ManualClock())
    produce(log, A, 0)  # 0-1
    produce(log, B, 0)  # 2-3
    end(log, A, commit=False)  # 4, LSO after it: 2 (B open)
    end(log, B, commit=False)  # 5
    produce(log, A, 2)  # 6-7
    end(log, A, commit=True)  # 8
    assert log.last_stable_offset == 9
    assert log.aborted_txns(0, 9) == [AbortedTxn(A, 0, 4, 2), AbortedTxn(B, 2, 5, 6)]
    assert log.aborted_txns(5, 9) == [AbortedTxn(B, 2, 5, 6)]
    assert log.aborted_txns(6, 9) == []


def test_aborts_are_found_from_earlier_segments_and_truncated_with_the_log(tmp_path: Path) -> None:
    log = open_log(tmp_path, ManualClock(), **SMALL)
    produce(log, A, 0)
    for i in range(40):  # other producers' data rolls several segments while A's transaction is open
        produce(log, B, i * 2)
        end(log, B, commit=True)
    assert log.segment_count > 2
    marker = end(log, A, commit=False)
    assert log.segments[0].txn_index.entries == []
    assert log.aborted_txns(0, log.log_end_offset) == [AbortedTxn(A, 0, marker, marker + 1)]
    log.truncate_to(marker)  # a follower truncating below the abort forgets it
    assert log.aborted_txns(0, log.log_end_offset) == []
    assert A in log.producer_state.ongoing  # and A's transaction is open again


def test_recovery_rebuilds_the_txn_index_and_a_clean_restart_keeps_open_transactions(tmp_path: Path) -> None:
    clock = ManualClock()
    log = open_log(tmp_path, clock, **SMALL)
    b_seq = 0
    for i in range(12):
        produce(log, A, i * 2)
        if i % 3 == 0:
            produce(log, B, b_seq)
            b_seq += 2
        end(log, A, commit=i % 2 == 1)
        if i % 3 == 2:
            end(log, B, commit=False)
    produce(log, C, 0)  # left open
    found = log.aborted_txns(0, log.log_end_offset)
    assert len(found) >= 6
    files = {p.name: p.read_bytes() for p in (tmp_path / "t-0").glob("*.txnindex")}
    assert len(files) >= 2
    for p in (tmp_path / "t-0").glob("*.txnindex"):
        p.unlink()  # lost with the page cache, or never written
    # crash: no close(); every segment past the recovery point (0) is recovered
    again = PartitionLog.open(log.directory, log.config, clock, recover=True, recovery_point=0)
    assert {p.name: p.read_bytes() for p in (tmp_path / "t-0").glob("*.txnindex")} == files
    assert again.aborted_txns(0, again.log_end_offset) == found
    again.high_watermark = again.log_end_offset
    assert again.last_stable_offset == again.producer_state.ongoing[C]
    again.close()
    clean = PartitionLog.open(log.directory, log.config, clock, recover=False)
    clean.high_watermark = clean.log_end_offset
    assert clean.last_stable_offset == clean.producer_state.ongoing[C] == log.producer_state.ongoing[C]
    assert clean.aborted_txns(0, clean.log_end_offset) == found


def test_snapshot_carries_open_transactions_and_marker_only_producers() -> None:
    open_txn = ProducerEntry(A, 3, coordinator_epoch=2, current_txn_first_offset=17)
    from kafkad.storage.producer_state import BatchMetadata

    open_txn.batches.append(BatchMetadata(0, 4, 17, 21, 99))
    bumped = ProducerEntry(B, 6, coordinator_epoch=1, last_timestamp=123)  # only a marker since its bump
    out = decode_snapshot(encode_snapshot([open_txn, bumped]))
    assert out[A].current_txn_first_offset == 17 and list(out[A].batches) == list(open_txn.batches)
    assert out[B].epoch == 6 and not out[B].batches and out[B].timestamp == 123
    assert out[B].coordinator_epoch == 1


def test_transactional_producer_checks(tmp_path: Path) -> None:
    log = open_log(tmp_path, ManualClock())
    produce(log, A, 0, epoch=2)
    with pytest.raises(KafkaError) as info:  # a non-transactional write while its transaction is open
        log.append(memoryview(txn_batch(A, 2, 1, 2, transactional=False)), leader_epoch=0, now_ms=0)
    assert info.value.code is ErrorCode.INVALID_TXN_STATE
    with pytest.raises(KafkaError) as info:
        log.append_txn_marker(A, 1, True, 0, leader_epoch=0, now_ms=0)
    assert info.value.code is ErrorCode.INVALID_PRODUCER_EPOCH
    end(log, A, commit=False, epoch=3, coordinator_epoch=5)  # KIP-360: abort with a bumped epoch
    with pytest.raises(KafkaError) as info:
        log.append_txn_marker(A, 3, True, 4, leader_epoch=0, now_ms=0)
    assert info.value.code is ErrorCode.TRANSACTION_COORDINATOR_FENCED
    assert produce(log, A, 0, epoch=3) == (3, 4)  # the new epoch starts at sequence 0


def test_replicated_marker_completes_the_transaction_on_a_follower(tmp_path: Path) -> None:
    leader = open_log(tmp_path / "l", ManualClock())
    produce(leader, A, 0)
    end(leader, A, commit=False)
    follower = open_log(tmp_path / "f", ManualClock())
    data = leader.read(0, 1 << 20).slices[0].read()
    follower.append(memoryview(bytearray(data)), leader_epoch=0, now_ms=0, origin=AppendOrigin.REPLICATION)
    follower.high_watermark = follower.log_end_offset
    assert follower.last_stable_offset == 3
    assert follower.aborted_txns(0, 3) == [AbortedTxn(A, 0, 2, 3)]


def test_control_batch_builder_matches_kafkas_marker() -> None:
    batch = build_control_batch(
        ControlRecordType.ABORT, producer_id=A, producer_epoch=1, coordinator_epoch=7, timestamp=5
    )
    decoded = decode_batch(batch, verify_crc=True)
    assert decoded.header.is_control and decoded.header.is_transactional
    marker = decoded.control_record
    assert marker is not None and marker.type is ControlRecordType.ABORT and marker.coordinator_epoch == 7
    # Kafka's EndTransactionMarker: key = version 0, type; value = version 0, coordinator epoch
    assert decoded.records[0].key == bytes.fromhex("00000000")
    assert decoded.records[0].value == bytes.fromhex("000000000007")


def test_completed_transactions_are_forgotten_as_the_high_watermark_passes(tmp_path: Path) -> None:
    log = open_log(tmp_path, ManualClock())  # a follower's log: nobody asks it for its LSO
    for i in range(50):
        produce(log, A, i * 2)
        log.append_txn_marker(A, 0, True, 0, leader_epoch=0, now_ms=0)
        log.high_watermark = log.log_end_offset
    assert log.producer_state.unreplicated == []


def test_a_read_gets_only_the_aborts_overlapping_what_it_read(tmp_path: Path) -> None:
    log = open_log(tmp_path, ManualClock(), **{"index.interval.bytes": "1"})  # an index entry per batch
    produce(log, A, 0)  # 0-1
    end(log, A, commit=False)  # 2
    produce(log, B, 0)  # 3-4
    end(log, B, commit=False)  # 5
    produce(log, A, 2)  # 6-7
    end(log, A, commit=True)  # 8
    lso = log.last_stable_offset
    first_batch = log.read(0, 1, min_one_batch=True)  # offsets 0-1 only: the bound is the next batch, 2
    assert log.aborted_txns_for_read(0, first_batch, lso) == [AbortedTxn(A, 0, 2, 3)]
    from_b = log.read(3, 1, min_one_batch=True)
    assert log.aborted_txns_for_read(3, from_b, lso) == [AbortedTxn(B, 3, 5, 6)]
    after = log.read(6, 1 << 20)
    assert log.aborted_txns_for_read(6, after, lso) == []
    # A read ending inside a batch (max_bytes): bounded by the next index entry, never past the LSO.
    cut = log.read(0, first_batch.size + 10, min_one_batch=True)
    assert AbortedTxn(A, 0, 2, 3) in log.aborted_txns_for_read(0, cut, lso)
    everything = log.read(0, 1 << 20)
    assert log.aborted_txns_for_read(0, everything, lso) == [AbortedTxn(A, 0, 2, 3), AbortedTxn(B, 3, 5, 6)]


def test_a_log_without_aborts_answers_reads_without_its_segments(tmp_path: Path) -> None:
    log = open_log(tmp_path, ManualClock(), **SMALL)
    for i in range(20):
        produce(log, A, i * 2)
        end(log, A, commit=True)
    log.close()
    again = open_log(tmp_path, ManualClock(), **SMALL)
    again.high_watermark = again.log_end_offset
    assert again.segment_count > 2
    read = again.read(0, 1 << 20)
    assert again.aborted_txns_for_read(0, read, again.last_stable_offset) == []
    assert again.txn_aborts is False  # learnt once from the segments' (absent) indexes
