from __future__ import annotations

import struct
from pathlib import Path

import pytest
from crc32c import crc32c

from kafkad.clock import ManualClock
from kafkad.protocol.errors import ErrorCode, KafkaError
from kafkad.storage.partition_log import PartitionLog
from kafkad.storage.producer_state import (
    ProducerStateManager,
    decode_snapshot,
    encode_snapshot,
    list_snapshots,
)
from tests.unit.storage.test_partition_log_helpers import make_batch, open_log

PID = 4242


def produce(
    log: PartitionLog, seq: int, count: int = 2, epoch: int = 0, pid: int = PID
) -> tuple[int, int, bool]:
    batch = make_batch(count, producer_id=pid, producer_epoch=epoch, base_sequence=seq)
    r = log.append(memoryview(batch), leader_epoch=0, now_ms=0)
    return r.base_offset, r.last_offset, r.duplicate


def code_of(log: PartitionLog, seq: int, epoch: int = 0, count: int = 2) -> ErrorCode:
    with pytest.raises(KafkaError) as info:
        produce(log, seq, count, epoch)
    return info.value.code


def test_duplicate_returns_original_offsets_without_appending(tmp_path: Path) -> None:
    log = open_log(tmp_path, ManualClock())
    assert produce(log, 0) == (0, 1, False)
    assert produce(log, 2) == (2, 3, False)
    log.append(memoryview(make_batch(1)), leader_epoch=0, now_ms=0)  # a non-idempotent batch between
    assert produce(log, 0) == (0, 1, True)
    assert produce(log, 2) == (2, 3, True)
    assert log.log_end_offset == 5


def test_only_last_five_batches_are_deduplicated(tmp_path: Path) -> None:
    log = open_log(tmp_path, ManualClock())
    for i in range(6):
        produce(log, i * 2)
    assert produce(log, 10)[2]
    assert produce(log, 2)[2]
    assert code_of(log, 0) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER  # evicted: no longer a known dup


def test_out_of_order_and_fencing(tmp_path: Path) -> None:
    log = open_log(tmp_path, ManualClock())
    produce(log, 0, epoch=3)
    assert code_of(log, 5, epoch=3) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER  # gap
    assert code_of(log, 1, epoch=3, count=3) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER  # overlap, not a dup
    assert code_of(log, 0, epoch=2) == ErrorCode.INVALID_PRODUCER_EPOCH
    assert code_of(log, 7, epoch=4) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER  # new epoch must start at 0
    assert produce(log, 0, epoch=4)[2] is False
    assert log.producer_state.sequence_state(PID) == (4, 1)
    assert log.log_end_offset == 4


def test_unknown_producer_accepted_at_any_sequence(tmp_path: Path) -> None:
    log = open_log(tmp_path, ManualClock())
    assert produce(log, 57)[2] is False  # KIP-360: state may have been removed by retention
    assert produce(log, 59)[2] is False
    assert code_of(log, 70) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_sequence_wraps_at_int_max(tmp_path: Path) -> None:
    log = open_log(tmp_path, ManualClock())
    produce(log, 2**31 - 2, count=1)
    produce(log, 2**31 - 1, count=1)
    assert produce(log, 0, count=1)[2] is False


def test_snapshot_is_kafkas_crc_format(tmp_path: Path) -> None:
    manager = ProducerStateManager(tmp_path)
    log = open_log(tmp_path, ManualClock())
    produce(log, 0, count=3, epoch=2)
    data = encode_snapshot(log.producer_state.producers.values())
    version, crc, count = struct.unpack_from(">hIi", data)
    assert (version, count) == (1, 1) and crc == crc32c(data[6:])
    pid, epoch, last_seq, last_offset, delta, _ts, coord, txn = struct.unpack_from(">qhiqiqiq", data, 10)
    assert (pid, epoch, last_seq, last_offset, delta, coord, txn) == (PID, 2, 2, 2, 2, -1, -1)
    entry = decode_snapshot(data)[PID]
    assert (entry.batches[0].first_seq, entry.batches[0].first_offset) == (0, 0)
    broken = bytearray(data)
    broken[-1] ^= 1
    with pytest.raises(KafkaError):
        decode_snapshot(bytes(broken))
    assert manager.load(0, 100) == 0  # no snapshot files in tmp_path itself


def test_crash_rebuilds_producer_state_from_batch_headers(tmp_path: Path) -> None:
    clock = ManualClock()
    log = open_log(tmp_path, clock, **{"segment.bytes": "1024"})
    for i in range(20):
        produce(log, i * 2)
    assert log.segment_count >= 2
    snapshots = list_snapshots(log.directory)
    assert snapshots  # one per roll
    # crash: no close(); the newest snapshot is stale, the tail is replayed from headers
    again = PartitionLog.open(log.directory, log.config, clock, recover=True)
    assert again.stats.replayed_batches > 0
    assert again.producer_state.sequence_state(PID) == (0, 39)
    assert produce(again, 38)[2] is True
    assert produce(again, 40)[:2] == (40, 41)
    # with every snapshot gone the whole log is replayed
    for _, path in list_snapshots(again.directory):
        path.unlink()
    third = PartitionLog.open(again.directory, again.config, clock, recover=True)
    assert third.stats.replayed_batches == 21
    assert produce(third, 40)[2] is True


def test_truncation_rewinds_producer_state(tmp_path: Path) -> None:
    log = open_log(tmp_path, ManualClock(), **{"segment.bytes": "1024"})
    for i in range(20):
        produce(log, i * 2)
    log.truncate_to(20)  # keeps batches 0..9 (seqs up to 19)
    assert log.producer_state.sequence_state(PID) == (0, 19)
    assert all(offset <= 20 for offset, _ in list_snapshots(log.directory))
    assert produce(log, 20)[:2] == (20, 21)


def test_delete_records_forgets_producers_below_log_start(tmp_path: Path) -> None:
    log = open_log(tmp_path, ManualClock())
    produce(log, 0, pid=1)
    produce(log, 0, pid=2)
    log.high_watermark = log.log_end_offset
    log.delete_records(2)
    assert log.producer_state.sequence_state(1) is None
    assert log.producer_state.sequence_state(2) == (0, 1)


def test_idle_producers_expire(tmp_path: Path) -> None:
    log = open_log(tmp_path, ManualClock())
    batch = make_batch(1, ts=1000, producer_id=1, producer_epoch=0, base_sequence=0)
    log.append(memoryview(batch), leader_epoch=0, now_ms=1000)
    batch = make_batch(1, ts=5000, producer_id=2, producer_epoch=0, base_sequence=0)
    log.append(memoryview(batch), leader_epoch=0, now_ms=5000)
    assert log.producer_state.remove_expired(now_ms=9000, expiration_ms=5000) == [1]
    assert log.producer_state.sequence_state(2) == (0, 0)
