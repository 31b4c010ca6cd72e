from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from crc32c import crc32c

from kafkad.clock import ManualClock
from kafkad.protocol.errors import ErrorCode, KafkaError
from kafkad.storage.partition_log import AppendOrigin, PartitionLog
from kafkad.storage.records import read_header
from tests.unit.storage.test_partition_log_helpers import make_batch, open_log, read_all

SMALL = {"segment.bytes": "4096", "index.interval.bytes": "256"}


def fill(log: PartitionLog, clock: ManualClock, n: int, count: int = 3, step_ms: int = 10) -> list[bytes]:
    batches = []
    for i in range(n):
        b = make_batch(count, ts=clock.time_ms(), tag=i)
        log.append(memoryview(b), leader_epoch=1, now_ms=clock.time_ms())
        batches.append(bytes(b))
        clock.advance(step_ms)
    return batches


def test_kafka_python_batch_stored_byte_for_byte(tmp_path: Path) -> None:
    clock = ManualClock()
    log = open_log(tmp_path, clock)
    fill(log, clock, 2)
    original = bytes(make_batch(5, ts=clock.time_ms(), value_size=100))
    buf = bytearray(original)
    result = log.append(memoryview(buf), leader_epoch=7, now_ms=clock.time_ms())
    assert (result.base_offset, result.last_offset, result.log_append_time_ms) == (6, 10, -1)
    stored = log.read(6, 1 << 20).slices[0].read()
    assert stored[8:12] == original[8:12] and stored[16:] == original[16:]  # CRC'd region untouched
    assert int.from_bytes(stored[0:8], "big") == 6
    assert int.from_bytes(stored[12:16], "big") == 7
    assert crc32c(stored[21:]) == read_header(stored).crc
    log.close()


def test_offsets_are_assigned_across_a_multi_batch_append(tmp_path: Path) -> None:
    log = open_log(tmp_path, ManualClock())
    buf = make_batch(2) + make_batch(3) + make_batch(1)
    result = log.append(memoryview(buf), leader_epoch=0, now_ms=0)
    assert (result.base_offset, result.last_offset) == (0, 5)
    data = log.read(0, 1 << 20).slices[0].read()
    assert [
        read_header(data, p).base_offset for p in (0, len(make_batch(2)), len(make_batch(2) + make_batch(3)))
    ] == [0, 2, 5]
    assert log.log_end_offset == 6


def test_read_bounds_and_out_of_range(tmp_path: Path) -> None:
    clock = ManualClock()
    log = open_log(tmp_path, clock)
    batches = fill(log, clock, 4)  # offsets 0..11
    size = len(batches[0])
    with pytest.raises(KafkaError) as info:
        log.read(13, 100)
    assert info.value.code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert log.read(12, 100).slices == []  # at the log end: empty, not an error
    assert log.read(4, 1 << 20).slices[0].position == size  # offset 4 lives in the 2nd batch
    assert log.read(0, 1 << 20, max_offset=6).size == 2 * size  # high watermark
    assert log.read(6, 1 << 20, max_offset=6).size == 0
    assert log.read(0, 10).size == size  # min_one_batch returns a whole first batch
    assert log.read(0, 10, min_one_batch=False).size == 10
    assert log.read(0, size + 5).size == size + 5  # partial last batch, like Kafka


def test_rejects_corrupt_and_oversized_batches(tmp_path: Path) -> None:
    log = open_log(tmp_path, ManualClock(), **{"max.message.bytes": "500"})
    bad = make_batch(2)
    bad[-1] ^= 0xFF
    with pytest.raises(KafkaError) as info:
        log.append(memoryview(bad), leader_epoch=0, now_ms=0)
    assert info.value.code == ErrorCode.CORRUPT_MESSAGE
    with pytest.raises(KafkaError) as info:
        log.append(memoryview(make_batch(1, value_size=600)), leader_epoch=0, now_ms=0)
    assert info.value.code == ErrorCode.MESSAGE_TOO_LARGE
    assert log.log_end_offset == 0 and log.size_bytes == 0


def test_log_append_time(tmp_path: Path) -> None:
    clock = ManualClock()
    log = open_log(tmp_path, clock, **{"message.timestamp.type": "LogAppendTime"})
    result = log.append(memoryview(make_batch(3, ts=5)), leader_epoch=0, now_ms=clock.time_ms())
    assert result.log_append_time_ms == clock.time_ms()
    header = read_header(log.read(0, 1000).slices[0].read())
    assert header.max_timestamp == clock.time_ms() and header.timestamp_type == 1


def test_roll_by_size_time_index_and_offset_overflow(tmp_path: Path) -> None:
    clock = ManualClock()
    log = open_log(tmp_path, clock, **SMALL)
    fill(log, clock, 100)  # ~ 100 * 100 bytes -> several 4 KiB segments
    assert log.segment_count >= 3
    assert all(info.size_bytes <= 4096 for info in log.closed_segments())
    names = sorted(p.name for p in log.directory.glob("*.log"))
    assert names[0] == "00000000000000000000.log" and len(names[1]) == 24
    # time: segment.ms
    tlog = open_log(tmp_path / "t", clock, **{"segment.ms": "1000"})
    fill(tlog, clock, 3, step_ms=400)
    assert tlog.segment_count == 1
    clock.advance(1000)
    fill(tlog, clock, 1)
    assert tlog.segment_count == 2
    # index full: 2 entries of 8 bytes
    ilog = open_log(tmp_path / "i", clock, **{"segment.index.bytes": "16", "index.interval.bytes": "1"})
    fill(ilog, clock, 6)
    assert ilog.segment_count >= 2
    # offsets that would not fit int32 relative to the base
    rlog = open_log(tmp_path / "r", clock)
    rlog.append(memoryview(make_batch(1)), leader_epoch=0, now_ms=0)
    far = make_batch(1)
    far[0:8] = (2**31 + 5).to_bytes(8, "big")
    rlog.append(memoryview(far), leader_epoch=0, now_ms=0, origin=AppendOrigin.REPLICATION)
    assert rlog.segment_count == 2 and rlog.log_end_offset == 2**31 + 6
    assert rlog.read(2**31 + 5, 1000).size == len(far)


def test_read_follows_segments_and_lookup_by_timestamp(tmp_path: Path) -> None:
    clock = ManualClock()
    log = open_log(tmp_path, clock, **SMALL)
    start = clock.time_ms()
    batches = fill(log, clock, 100)
    assert read_all(log) == b"".join(_stamp(b, i * 3, 1) for i, b in enumerate(batches))
    assert log.offset_for_timestamp(start + 505) == (start + 510, 153)  # batch 51: ts +510..+512
    assert log.offset_for_timestamp(start + 511) == (start + 511, 154)  # a record inside the batch
    assert log.offset_for_timestamp(start + 10**6) is None
    assert log.offset_for_timestamp(-2) == (-1, 0)
    assert log.offset_for_timestamp(-1) == (-1, 300)
    assert log.offset_for_timestamp(-3) == (start + 992, 299)  # the record's offset, not its batch's


def _stamp(batch: bytes, offset: int, epoch: int) -> bytes:
    return offset.to_bytes(8, "big") + batch[8:12] + epoch.to_bytes(4, "big") + batch[16:]


def test_truncate_to_and_continue(tmp_path: Path) -> None:
    clock = ManualClock()
    log = open_log(tmp_path, clock, **SMALL)
    fill(log, clock, 100)
    log.leader_epoch_cache.assign(2, 150)
    segments = log.segment_count
    log.truncate_to(150)
    assert log.log_end_offset == 150 and log.segment_count < segments
    assert log.leader_epoch_cache.entries == [(1, 0)]
    assert log.read(147, 1000).size > 0
    with pytest.raises(KafkaError):
        log.read(151, 1000)
    result = log.append(memoryview(make_batch(2)), leader_epoch=3, now_ms=clock.time_ms())
    assert result.base_offset == 150
    assert log.end_offset_for_epoch(1) == (1, 150)
    assert len(list(tmp_path.rglob("*.deleted"))) > 0
    log.truncate_to(10**6)  # past the end: no-op
    assert log.log_end_offset == 152


def test_delete_records_and_retention(tmp_path: Path) -> None:
    clock = ManualClock()
    log = open_log(tmp_path, clock, **SMALL, **{"retention.ms": "5000", "file.delete.delay.ms": "1000"})
    fill(log, clock, 100)  # timestamps span 1000 ms
    log.high_watermark = log.log_end_offset
    with pytest.raises(KafkaError) as info:
        log.delete_records(log.log_end_offset + 1)
    assert info.value.code == ErrorCode.OFFSET_OUT_OF_RANGE
    first_next = log.closed_segments()[0].next_offset
    assert log.delete_records(first_next + 1) == first_next + 1
    assert log.closed_segments()[0].base_offset == first_next
    with pytest.raises(KafkaError):
        log.read(first_next, 100)
    assert log.retention_candidates(clock.time_ms()) == []
    clock.advance(4800)  # the closed segment (newest ts 288 ms ago) is now past retention.ms, the active not
    candidates = log.retention_candidates(clock.time_ms())
    assert [c.base_offset for c in candidates] == [first_next]
    assert log.apply_retention(clock.time_ms()) == 1
    assert log.log_start_offset == log.active_segment.base_offset and log.segment_count == 1
    # the deleted files linger renamed, fds open, until file.delete.delay.ms
    assert len(list(log.directory.glob("*.log.deleted"))) == 2
    assert log.reap_deleted() == 1  # the DeleteRecords one, 4800 ms old; retention's is still young
    assert len(list(log.directory.glob("*.log.deleted"))) == 1
    clock.advance(1000)
    assert log.reap_deleted() == 1
    assert not list(log.directory.glob("*.deleted"))
    # size-based
    blog = open_log(tmp_path / "b", clock, **SMALL, **{"retention.bytes": "8000"})
    fill(blog, clock, 100)
    blog.high_watermark = blog.log_end_offset
    blog.apply_retention(clock.time_ms())
    assert blog.size_bytes <= 8000 + 4096
    assert blog.delete_oldest_segment() is not None


def test_deleted_segment_fd_still_readable_until_reaped(tmp_path: Path) -> None:
    clock = ManualClock()
    log = open_log(tmp_path, clock, **SMALL)
    fill(log, clock, 100)
    log.high_watermark = log.log_end_offset
    piece = log.read(0, 1 << 20).slices[0]
    expected = piece.read()
    log.delete_oldest_segment()
    assert os.pread(piece.fd, piece.size, piece.position) == expected  # what a pending sendfile sees
    log.reap_deleted(force=True)


def test_clean_reopen_scans_nothing(tmp_path: Path) -> None:
    clock = ManualClock()
    log = open_log(tmp_path, clock, **SMALL)
    fill(log, clock, 100)
    log.append(
        memoryview(make_batch(2, producer_id=9, producer_epoch=0, base_sequence=0)), leader_epoch=2, now_ms=0
    )
    before = read_all(log)
    leo = log.log_end_offset
    log.close()
    again = open_log(tmp_path, clock, **SMALL)
    assert again.stats.recovered_segments == 0 and again.stats.recovered_bytes == 0
    assert again.stats.replayed_batches == 0  # producer state came from the snapshot at the log end
    assert again.log_end_offset == leo
    assert read_all(again) == before
    assert again.producer_state.sequence_state(9) == (0, 1)
    assert again.leader_epoch_cache.entries == [(1, 0), (2, 300)]
    assert again.offset_for_timestamp(-3) is not None


def test_unclean_reopen_recovers_after_recovery_point(tmp_path: Path) -> None:
    clock = ManualClock()
    log = open_log(tmp_path, clock, **SMALL)
    fill(log, clock, 100)
    log.flush()
    rp = log.recovery_point
    fill(log, clock, 20)
    before = read_all(log)
    leo = log.log_end_offset
    # crash: no close(); reopen with recovery
    again = PartitionLog.open(log.directory, log.config, clock, recover=True, recovery_point=rp)
    assert 1 <= again.stats.recovered_segments < again.segment_count
    assert again.log_end_offset == leo
    assert read_all(again) == before


def test_flush_from_a_thread_while_appending(tmp_path: Path) -> None:
    clock = ManualClock()
    log = open_log(tmp_path, clock, **SMALL, **{"flush.messages": "30"})
    fill(log, clock, 9)
    assert not log.flush_due()
    fill(log, clock, 1)
    assert log.flush_due()
    errors: list[BaseException] = []

    def flusher() -> None:
        try:
            for _ in range(20):
                log.flush()
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    thread = threading.Thread(target=flusher)
    thread.start()
    fill(log, clock, 50)
    thread.join()
    assert not errors
    log.flush()
    assert log.recovery_point == log.log_end_offset and not log.flush_due()


def test_replication_append_keeps_leader_offsets_and_epochs(tmp_path: Path) -> None:
    clock = ManualClock()
    leader = open_log(tmp_path / "l", clock)
    leader.append(memoryview(make_batch(2)), leader_epoch=4, now_ms=0)
    leader.append(memoryview(make_batch(3)), leader_epoch=5, now_ms=0)
    data = bytearray(leader.read(0, 1 << 20).slices[0].read())
    follower = open_log(tmp_path / "f", clock)
    result = follower.append(memoryview(data), leader_epoch=-1, now_ms=0, origin=AppendOrigin.REPLICATION)
    assert (result.base_offset, result.last_offset) == (0, 4)
    assert follower.leader_epoch_cache.entries == [(4, 0), (5, 2)]
    with pytest.raises(KafkaError):
        follower.append(
            memoryview(bytearray(data)), leader_epoch=-1, now_ms=0, origin=AppendOrigin.REPLICATION
        )


def test_release_closes_without_writing(tmp_path: Path) -> None:
    clock = ManualClock()
    log = open_log(tmp_path, clock, **SMALL)
    fill(log, clock, 60)
    log.high_watermark = log.log_end_offset
    log.delete_oldest_segment()
    fd = log.active_segment.fd
    snapshots = sorted(log.directory.glob("*.snapshot"))
    log.release()
    assert sorted(log.directory.glob("*.snapshot")) == snapshots  # no snapshot at the log end
    with pytest.raises(OSError):
        os.fstat(fd)


def test_compressed_batch_stored_as_is_and_found_by_timestamp(tmp_path: Path) -> None:
    log = open_log(tmp_path, ManualClock())
    original = bytes(make_batch(4, ts=1000, value_size=200, compression=1))  # gzip
    log.append(memoryview(bytearray(original)), leader_epoch=0, now_ms=1000)
    stored = log.read(0, 1 << 20).slices[0].read()
    assert stored[16:] == original[16:] and len(stored) < 4 * 200
    assert log.offset_for_timestamp(1001) == (1001, 1)  # records inside compressed batches, as Kafka


@pytest.mark.parametrize("compression", [0, 1])
def test_max_timestamp_answers_the_record_inside_its_batch(tmp_path: Path, compression: int) -> None:
    """ListOffsets -3 answers the first record holding the max timestamp (Kafka 3.8+), not its batch's
    base offset, in a plain and a compressed batch, with other batches around it."""
    from kafka.record.default_records import DefaultRecordBatchBuilder

    def batch(timestamps: list[int]) -> bytearray:
        builder = DefaultRecordBatchBuilder(2, compression, 0, -1, -1, -1, 1 << 30)
        for i, ts in enumerate(timestamps):
            builder.append(i, timestamp=ts, key=None, value=b"v", headers=[])
        return bytearray(builder.build())

    log = open_log(tmp_path, ManualClock())
    for timestamps in ([1_000, 2_000], [3_000, 9_000, 4_000, 9_000, 5_000], [6_000]):
        log.append(memoryview(batch(timestamps)), leader_epoch=0, now_ms=0)
    assert log.offset_for_timestamp(-3) == (9_000, 3)  # batch 2..6: the first 9_000 is offset 3
    log.close()


def test_segment_ms_measures_record_timestamps_like_kafka(tmp_path: Path) -> None:
    clock = ManualClock()
    log = open_log(tmp_path, clock, **{"segment.ms": "1000"})
    old = clock.time_ms() - 30 * 86_400_000  # replaying month-old data must not roll on every append
    for i in range(5):
        log.append(memoryview(make_batch(1, ts=old + i * 100)), leader_epoch=0, now_ms=clock.time_ms())
    assert log.segment_count == 1
    log.append(memoryview(make_batch(1, ts=old + 1500)), leader_epoch=0, now_ms=clock.time_ms())
    assert log.segment_count == 2


def test_roll_makes_a_flush_due_and_flush_advances_recovery_point(tmp_path: Path) -> None:
    clock = ManualClock()
    log = open_log(tmp_path, clock, **SMALL)
    fill(log, clock, 10)
    assert log.segment_count == 1 and not log.flush_due()
    fill(log, clock, 40)
    assert log.segment_count > 1 and log.flush_due()
    assert log.flush(up_to=50) == 50 and log.recovery_point == 50
    assert not log.flush_due()
    clock.advance(10**6)
    assert not log.flush_due()  # flush.ms defaults to Long.MAX: page cache only


def test_crash_rebuilds_leader_epochs_from_batches(tmp_path: Path) -> None:
    clock = ManualClock()
    log = open_log(tmp_path, clock, **SMALL)
    for epoch in (1, 1, 4, 4, 7):
        log.append(memoryview(make_batch(2)), leader_epoch=epoch, now_ms=0)
    (log.directory / "leader-epoch-checkpoint").write_text("0\n1\n1 0\n")  # an update that was lost
    again = PartitionLog.open(log.directory, log.config, clock, recover=True)
    assert again.leader_epoch_cache.entries == [(1, 0), (4, 4), (7, 8)]
    assert again.end_offset_for_epoch(4) == (4, 8)
    assert again.end_offset_for_epoch(7) == (7, 10)
