"""A clean-shutdown marker is a hint, not a proof: damage found at a clean start is recovered, not fatal.

Each test closes a log cleanly (what the LogManager does before writing the marker), damages its files
the way a filesystem that kept the marker but not the data would, and opens it again without recovery
(recover=False, as after a marker): the log must come back with every whole batch before the damage,
truncated there, a WARNING naming the file, and keep taking appends.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from kafkad.clock import ManualClock
from kafkad.storage.partition_log import PartitionLog
from kafkad.storage.segment import file_stem
from tests.unit.storage.test_partition_log_helpers import make_batch, open_log, read_all

CONFIG = {"segment.bytes": "1500", "index.interval.bytes": "200"}


def closed_log(tmp_path: Path) -> tuple[PartitionLog, list[tuple[int, int]]]:
    """A cleanly closed log of >= 3 segments, its active one holding >= 4 batches (and index entries);
    returns it and the (start, end) positions of the active segment's batches."""
    clock = ManualClock()
    log = open_log(tmp_path, clock, **CONFIG)
    i = 0
    while log.segment_count < 3 or log.active_segment.offset_index.entries < 3:
        batch = make_batch(3, ts=clock.time_ms(), tag=i, value_size=40)
        log.append(memoryview(batch), leader_epoch=1, now_ms=clock.time_ms())
        clock.advance(5)
        i += 1
    bounds = []
    seg = log.active_segment
    pos = 0
    while pos < seg.size:
        header = seg.header_at(pos)
        bounds.append((pos, pos + header.size))
        pos += header.size
    log.close()
    return log, bounds


def reopen_clean(closed: PartitionLog) -> PartitionLog:
    return PartitionLog.open(
        closed.directory,
        closed.config,
        ManualClock(),
        recover=False,
        recovery_point=closed.log_end_offset,
        log_start_offset=0,
    )


def active_log_path(closed: PartitionLog) -> Path:
    base = max(int(p.name[:20]) for p in closed.directory.glob("*.log"))
    return closed.directory / (file_stem(base) + ".log")


def expect_prefix(reopened: PartitionLog, closed_leo: int, kept_batches: int, total_batches: int) -> None:
    """The log ends `total - kept` batches (3 records each) before the original end and still appends."""
    assert reopened.log_end_offset == closed_leo - 3 * (total_batches - kept_batches)
    assert reopened.active_segment.size == os.path.getsize(reopened.active_segment.log_path)
    result = reopened.append(memoryview(make_batch(2)), leader_epoch=2, now_ms=0)
    assert result.base_offset == reopened.log_end_offset - 2


def test_undamaged_clean_start_recovers_nothing(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    closed, _ = closed_log(tmp_path)
    with caplog.at_level(logging.WARNING):
        reopened = reopen_clean(closed)
    assert reopened.log_end_offset == closed.log_end_offset
    assert reopened.stats.recovered_segments == 0
    assert not caplog.records
    reopened.close()


def test_trailing_garbage_after_a_clean_shutdown_is_cut(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    closed, bounds = closed_log(tmp_path)
    path = active_log_path(closed)
    before = path.read_bytes()
    with path.open("ab") as f:
        f.write(b"\x5a" * 37)  # the reproduction: 37 bytes past the last batch
    with caplog.at_level(logging.WARNING):
        reopened = reopen_clean(closed)
    assert path.read_bytes()[: len(before)] == before
    expect_prefix(reopened, closed.log_end_offset, len(bounds), len(bounds))
    assert reopened.stats.truncated_bytes == 37
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(str(path) in m for m in warnings), warnings
    reopened.close()


@pytest.mark.parametrize("cut_into", ["header", "body"])
def test_a_truncated_last_batch_is_dropped(tmp_path: Path, cut_into: str) -> None:
    closed, bounds = closed_log(tmp_path)
    path = active_log_path(closed)
    start, end = bounds[-1]
    os.truncate(path, start + (20 if cut_into == "header" else (end - start) // 2 + 40))
    reopened = reopen_clean(closed)
    expect_prefix(reopened, closed.log_end_offset, len(bounds) - 1, len(bounds))
    assert read_all(reopened, 0, closed.log_end_offset - 3) == read_all(
        reopened, 0, reopened.log_end_offset - 2
    )
    reopened.close()


def test_a_zeroed_tail_of_the_same_size_is_cut_at_the_first_zeroed_batch(tmp_path: Path) -> None:
    closed, bounds = closed_log(tmp_path)
    path = active_log_path(closed)
    data = bytearray(path.read_bytes())
    end = bounds[-1][1]
    data[end - 30 : end] = bytes(30)  # inside the last batch's records: only its CRC can tell
    path.write_bytes(bytes(data))
    reopened = reopen_clean(closed)
    expect_prefix(reopened, closed.log_end_offset, len(bounds) - 1, len(bounds))
    reopened.close()


def test_a_zero_extended_file_is_cut_back(tmp_path: Path) -> None:
    closed, bounds = closed_log(tmp_path)
    path = active_log_path(closed)
    with path.open("ab") as f:
        f.write(bytes(8192))  # the size grew but the data never reached the disk
    reopened = reopen_clean(closed)
    expect_prefix(reopened, closed.log_end_offset, len(bounds), len(bounds))
    reopened.close()


@pytest.mark.parametrize("which", ["active", "older"])
@pytest.mark.parametrize("damage", ["torn", "past_the_log"])
def test_a_corrupt_index_with_a_clean_marker_is_rebuilt(tmp_path: Path, which: str, damage: str) -> None:
    closed, _ = closed_log(tmp_path)
    bases = sorted(int(p.name[:20]) for p in closed.directory.glob("*.log"))
    base = bases[-1] if which == "active" else bases[0]
    index = closed.directory / (file_stem(base) + ".index")
    data = bytearray(index.read_bytes())
    assert len(data) >= 16
    if damage == "torn":  # the last two entries do not increase: a write the disk never finished
        data[-16:] = b"\x00\x00\x00\x05\x00\x00\x03\x00" + bytes(8)
    else:  # increasing, but the last entry names an offset past the segment's data
        data[-8:] = (int.from_bytes(data[-16:-12], "big") + 500).to_bytes(4, "big") + data[-4:]
    index.write_bytes(bytes(data))
    check = reopen_clean(closed)
    assert check.log_end_offset == closed.log_end_offset
    assert check.stats.recovered_segments == 1
    expected = read_all(check)
    check.close()
    again = reopen_clean(closed)  # the rebuilt index is trusted the next time
    assert again.stats.recovered_segments == 0 and read_all(again) == expected
    assert again.log_end_offset == closed.log_end_offset
    again.close()


def test_an_index_entry_past_the_log_end_is_rebuilt(tmp_path: Path) -> None:
    """The index says more was written than the log holds (the log lost its tail, the index did not)."""
    closed, bounds = closed_log(tmp_path)
    path = active_log_path(closed)
    os.truncate(path, bounds[0][1])  # only the first batch of the active segment is left
    reopened = reopen_clean(closed)
    expect_prefix(reopened, closed.log_end_offset, 1, len(bounds))
    reopened.close()
