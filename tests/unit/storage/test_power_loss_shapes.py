"""One test per power-loss shape the loader used to get wrong (the property test in
tests/property/test_storage_power_loss.py mixes them at random; these pin each one down).

Each builds a log of several segments, "loses power" (the files as left, nothing written at close),
damages them like a filesystem that lost unsynced data, and reopens with recovery.
"""

from __future__ import annotations

from pathlib import Path

from kafkad.clock import ManualClock
from kafkad.storage.leader_epoch import CHECKPOINT_FILE
from kafkad.storage.partition_log import PartitionLog
from tests.unit.storage.test_partition_log_helpers import make_batch, open_log, read_all

CONFIG = {"segment.bytes": "1200", "index.interval.bytes": "200"}


def crashed(
    tmp_path: Path, batches: int = 30, epochs: tuple[int, ...] = (1,), extra: dict[str, str] | None = None
) -> PartitionLog:
    """`batches` batches of 3 records (the epochs split them evenly), then a power loss: no close."""
    clock = ManualClock()
    log = open_log(tmp_path, clock, **CONFIG, **(extra or {}))
    for i in range(batches):
        epoch = epochs[i * len(epochs) // batches]
        batch = make_batch(3, ts=clock.time_ms(), tag=i, value_size=40)
        log.append(memoryview(batch), leader_epoch=epoch, now_ms=clock.time_ms())
        clock.advance(5)
    assert log.segment_count >= 4
    log.release()
    return log


def reopen(log: PartitionLog, recovery_point: int, log_start_offset: int = 0) -> PartitionLog:
    return PartitionLog.open(
        log.directory,
        log.config,
        ManualClock(),
        recover=True,
        recovery_point=recovery_point,
        log_start_offset=log_start_offset,
    )


def seg_paths(log: PartitionLog) -> list[Path]:
    return sorted(log.directory.glob("*.log"), key=lambda p: int(p.name[:20]))


def test_a_recovery_point_past_the_log_end_does_not_vouch_for_unflushed_segments(tmp_path: Path) -> None:
    log = crashed(tmp_path)
    paths = seg_paths(log)
    older = paths[1]  # a closed segment: trusted without recovery below the recovery point
    data = older.read_bytes()
    older.write_bytes(data[: len(data) // 2] + bytes(len(data) - len(data) // 2))  # lost, size kept
    cut_at = int(paths[1].name[:20])
    reopened = reopen(log, recovery_point=10**9)  # the checkpoint claims far more than the files hold
    try:
        assert reopened.log_end_offset < int(paths[2].name[:20])
        assert reopened.log_end_offset >= cut_at
        assert b"\x00" * 61 not in read_all(reopened)
        assert reopened.recovery_point <= reopened.log_end_offset
        assert reopened.append(memoryview(make_batch(1)), leader_epoch=1, now_ms=0).base_offset == (
            reopened.log_end_offset - 1
        )
    finally:
        reopened.close()


def test_an_epoch_checkpoint_older_than_the_log_is_rebuilt(tmp_path: Path) -> None:
    log = crashed(tmp_path, epochs=(1, 2, 3))
    assert [e for e, _ in log.leader_epoch_cache.entries] == [1, 2, 3]
    expected = log.leader_epoch_cache.entries
    (log.directory / CHECKPOINT_FILE).write_text("0\n1\n1 0\n")  # the rewrites for epochs 2 and 3 lost
    active_base = int(seg_paths(log)[-1].name[:20])
    reopened = reopen(log, recovery_point=active_base)  # only the active segment is recovered
    try:
        assert reopened.leader_epoch_cache.entries == expected
        assert reopened.end_offset_for_epoch(1) == (1, expected[1][1])
    finally:
        reopened.close()


def test_a_missing_epoch_checkpoint_is_rebuilt_from_every_batch(tmp_path: Path) -> None:
    log = crashed(tmp_path, epochs=(4, 6))
    expected = log.leader_epoch_cache.entries
    (log.directory / CHECKPOINT_FILE).unlink()
    reopened = reopen(log, recovery_point=int(seg_paths(log)[-1].name[:20]))
    try:
        assert reopened.leader_epoch_cache.entries == expected
    finally:
        reopened.close()


def test_an_index_of_a_torn_length_is_rebuilt(tmp_path: Path) -> None:
    log = crashed(tmp_path)
    before = b"".join(p.read_bytes() for p in seg_paths(log))
    for path in seg_paths(log):
        path.with_suffix(".index").write_bytes(b"\x5a" * 1003)  # not a multiple of 8
        path.with_suffix(".timeindex").write_bytes(b"\x00" * 7)
    reopened = reopen(log, recovery_point=0)
    try:
        assert read_all(reopened) == before
        assert reopened.log_end_offset == 90
    finally:
        reopened.close()


def test_a_vanished_middle_segment_ends_the_log_there(tmp_path: Path) -> None:
    log = crashed(tmp_path)
    paths = seg_paths(log)
    gone = paths[2]
    for suffix in (".log", ".index", ".timeindex"):
        gone.with_suffix(suffix).unlink()
    reopened = reopen(log, recovery_point=int(paths[1].name[:20]))
    try:
        assert reopened.log_end_offset == int(gone.name[:20])  # no hole: the later segments went too
        assert [s.base_offset for s in reopened.segments] == [int(p.name[:20]) for p in paths[:2]]
        assert not paths[3].exists()
    finally:
        reopened.close()


def test_a_compacted_log_keeps_segments_after_a_gap(tmp_path: Path) -> None:
    """The cleaner leaves gaps between segments of a compacted log: they are not a lost tail."""
    log = crashed(tmp_path, extra={"cleanup.policy": "compact"})
    paths = seg_paths(log)
    gone = paths[2]
    for suffix in (".log", ".index", ".timeindex"):
        gone.with_suffix(suffix).unlink()
    reopened = reopen(log, recovery_point=0)
    try:
        assert reopened.log_end_offset == 90
        assert len(reopened.segments) == len(paths) - 1
    finally:
        reopened.close()


def test_a_log_start_checkpoint_past_the_log_end_leaves_an_empty_log_that_appends(tmp_path: Path) -> None:
    log = crashed(tmp_path)
    last = seg_paths(log)[-1]
    last.write_bytes(b"")  # the active segment lost everything
    reopened = reopen(log, recovery_point=0, log_start_offset=10**6)
    try:
        end = reopened.log_end_offset
        assert reopened.log_start_offset == end == int(last.name[:20])
        assert reopened.read(end, 1 << 20).slices == []
        assert reopened.append(memoryview(make_batch(2)), leader_epoch=2, now_ms=0).base_offset == end
    finally:
        reopened.close()
