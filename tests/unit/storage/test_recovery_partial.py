"""Recovery from the recovery point: the fsynced prefix of a segment is walked, not CRC-checked.

Every test compares against a full recovery (recovery point 0) of a copy of the same crashed files:
offsets, bytes, both indexes, leader epochs and producer state must come out the same.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkad.clock import ManualClock
from kafkad.storage.partition_log import PartitionLog
from tests.unit.storage.test_partition_log_helpers import make_batch, open_log, read_all

ONE_SEGMENT = {"segment.bytes": str(1 << 20), "index.interval.bytes": "256"}


def crashed_log(tmp_path: Path, flushed: int, unflushed: int) -> tuple[PartitionLog, int]:
    """A log of `flushed` batches fsynced (the recovery point) then `unflushed` more, never closed."""
    clock = ManualClock()
    log = open_log(tmp_path, clock, **ONE_SEGMENT)
    for i in range(flushed + unflushed):
        if i == flushed:
            log.flush()
        ts = clock.time_ms() - (i % 3) * 7  # timestamps not monotonic: the time index skips some
        batch = make_batch(3, ts=ts, tag=i, producer_id=7, producer_epoch=0, base_sequence=3 * i)
        log.append(memoryview(batch), leader_epoch=1 + i // 10, now_ms=clock.time_ms())
        clock.advance(10)
    if not unflushed:
        log.flush()
    return log, log.recovery_point


def reopen(directory: Path, config_from: PartitionLog, recovery_point: int) -> PartitionLog:
    return PartitionLog.open(
        directory, config_from.config, ManualClock(), recover=True, recovery_point=recovery_point
    )


def indexes(log: PartitionLog) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    seg = log.active_segment
    return (
        [seg.offset_index.entry(i) for i in range(seg.offset_index.entries)],
        [seg.time_index.entry(i) for i in range(seg.time_index.entries)],
    )


def same_state(a: PartitionLog, b: PartitionLog) -> None:
    assert a.log_end_offset == b.log_end_offset
    assert read_all(a) == read_all(b)
    assert indexes(a) == indexes(b)
    seg_a, seg_b = a.active_segment, b.active_segment
    assert (seg_a.max_timestamp, seg_a.offset_of_max_timestamp) == (
        seg_b.max_timestamp,
        seg_b.offset_of_max_timestamp,
    )
    assert seg_a.bytes_since_last_index_entry == seg_b.bytes_since_last_index_entry
    assert a.leader_epoch_cache.entries == b.leader_epoch_cache.entries
    assert a.producer_state.sequence_state(7) == b.producer_state.sequence_state(7)


def partial_and_full(tmp_path: Path, log: PartitionLog, rp: int) -> tuple[PartitionLog, PartitionLog]:
    copy = tmp_path / "copy" / log.directory.name
    shutil.copytree(log.directory, copy)
    return reopen(log.directory, log, rp), reopen(copy, log, 0)


def test_partial_recovery_rebuilds_what_a_full_one_does(tmp_path: Path) -> None:
    log, rp = crashed_log(tmp_path, 40, 25)
    assert 0 < rp < log.log_end_offset and log.segment_count == 1
    partial, full = partial_and_full(tmp_path, log, rp)
    same_state(partial, full)
    assert partial.log_end_offset == 65 * 3
    # The appends after recovery index like those before it.
    for a in (partial, full):
        a.append(memoryview(make_batch(50, tag=99)), leader_epoch=9, now_ms=0)
    same_state(partial, full)


def test_recovery_point_at_the_log_end_scans_nothing_and_keeps_everything(tmp_path: Path) -> None:
    log, rp = crashed_log(tmp_path, 30, 0)
    assert rp == log.log_end_offset
    partial, full = partial_and_full(tmp_path, log, rp)
    same_state(partial, full)
    assert partial.stats.truncated_bytes == 0


def test_damage_after_the_recovery_point_is_found_by_the_crc(tmp_path: Path) -> None:
    log, rp = crashed_log(tmp_path, 20, 10)
    position = log.active_segment.locate(rp + 6)
    assert position is not None
    with open(log.active_segment.log_path, "r+b") as f:
        f.seek(position[0] + 70)  # inside the records: only the CRC can tell
        f.write(b"\xff")
    partial, full = partial_and_full(tmp_path, log, rp)
    same_state(partial, full)
    assert partial.log_end_offset == rp + 6  # the two batches before the damaged one stay


def test_a_torn_header_before_the_recovery_point_still_cuts_the_log(tmp_path: Path) -> None:
    log, rp = crashed_log(tmp_path, 20, 10)
    position = log.active_segment.locate(15)
    assert position is not None
    with open(log.active_segment.log_path, "r+b") as f:
        f.seek(position[0] + 16)  # the magic byte
        f.write(b"\x07")
    partial, full = partial_and_full(tmp_path, log, rp)
    same_state(partial, full)
    assert partial.log_end_offset == 15


def test_the_fsynced_prefix_is_trusted_without_its_crc(tmp_path: Path) -> None:
    log, rp = crashed_log(tmp_path, 20, 10)
    position = log.active_segment.locate(9)
    assert position is not None
    with open(log.active_segment.log_path, "r+b") as f:
        f.seek(position[0] + 70)  # a record byte below the recovery point: not re-hashed
        f.write(b"\xff")
    partial = reopen(log.directory, log, rp)
    assert partial.log_end_offset == 30 * 3 and partial.stats.truncated_bytes == 0


def test_offsets_going_back_at_the_recovery_point_end_the_log_there(tmp_path: Path) -> None:
    log, rp = crashed_log(tmp_path, 20, 10)
    seg = log.active_segment
    first = seg.locate(rp)
    assert first is not None
    with open(seg.log_path, "r+b") as f:
        f.seek(first[0])
        f.write((rp - 3).to_bytes(8, "big"))  # baseOffset is outside the CRC
    partial, full = partial_and_full(tmp_path, log, rp)
    same_state(partial, full)
    assert partial.log_end_offset == rp


def test_a_torn_tail_is_truncated_after_a_partial_recovery(tmp_path: Path) -> None:
    log, rp = crashed_log(tmp_path, 20, 10)
    size = os.path.getsize(log.active_segment.log_path)
    with open(log.active_segment.log_path, "ab") as f:
        f.write(bytes(make_batch(2))[:50])
    partial, full = partial_and_full(tmp_path, log, rp)
    same_state(partial, full)
    assert partial.stats.truncated_bytes == 50 and os.path.getsize(partial.active_segment.log_path) == size


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    counts=st.lists(st.integers(1, 6), min_size=1, max_size=40),
    flushed=st.floats(0, 1),
    damage=st.one_of(st.none(), st.tuples(st.floats(0, 1), st.integers(1, 255), st.booleans())),
)
def test_partial_equals_full_recovery(
    tmp_path_factory: pytest.TempPathFactory,
    counts: list[int],
    flushed: float,
    damage: tuple[float, int, bool] | None,
) -> None:
    root = tmp_path_factory.mktemp("log")
    clock = ManualClock()
    log = open_log(root, clock, **ONE_SEGMENT)
    k = int(len(counts) * flushed)
    for i, count in enumerate(counts):
        if i == k:
            log.flush()
        batch = make_batch(count, ts=clock.time_ms() - i % 4, tag=i, value_size=1 + 37 * i % 90)
        log.append(memoryview(batch), leader_epoch=1 + i // 7, now_ms=clock.time_ms())
        clock.advance(3)
    rp = log.recovery_point
    path = log.active_segment.log_path
    found = log.active_segment.locate(rp)
    start = found[0] if found is not None else os.path.getsize(path)  # the CRC'd part starts here
    size = os.path.getsize(path)
    if damage is not None and start < size:
        where, xor, truncate = damage
        p = start + min(int((size - start) * where), size - start - 1)
        with open(path, "r+b") as f:
            if truncate:
                f.truncate(p)
            else:
                f.seek(p)
                byte = f.read(1)[0]
                f.seek(p)
                f.write(bytes([byte ^ xor]))
    partial, full = partial_and_full(root, log, rp)
    same_state(partial, full)


def test_a_segment_with_a_broken_index_is_crc_checked_whole(tmp_path: Path) -> None:
    log, rp = crashed_log(tmp_path, 20, 0)
    seg_path = log.active_segment.log_path
    log.close()  # clean: the recovery point is the log end and the indexes are trimmed
    size = os.path.getsize(seg_path)
    with open(seg_path, "r+b") as f:
        f.seek(70)  # a record byte of the first batch
        byte = f.read(1)[0]
        f.seek(70)
        f.write(bytes([byte ^ 1]))
    seg_path.with_suffix(".index").unlink()  # forces a rebuild of this segment
    again = PartitionLog.open(log.directory, log.config, ManualClock(), recover=False, recovery_point=rp)
    assert again.log_end_offset == 0
    assert again.stats.truncated_bytes == size
