from __future__ import annotations

import os
from pathlib import Path

import pytest

from kafkad.clock import ManualClock
from kafkad.protocol.errors import KafkaError
from kafkad.storage.partition_log import PartitionLog
from kafkad.storage.records import patch_offset_and_epoch
from kafkad.storage.segment import LogSegment
from tests.unit.storage.test_partition_log_helpers import make_batch, open_log, read_all

TS = 1_700_000_000_000


def segment_with(
    tmp_path: Path, n: int, base: int = 100, interval: int = 150
) -> tuple[LogSegment, list[bytes]]:
    seg = LogSegment(tmp_path, base, index_bytes=4096, index_interval_bytes=interval, now_ms=TS)
    offset = base
    stored = []
    for i in range(n):
        b = make_batch(2, ts=TS + 10 * i, tag=i)
        patch_offset_and_epoch(b, 0, offset, 0)
        seg.append(offset + 1, TS + 10 * i + 1, offset, memoryview(b))
        stored.append(bytes(b))
        offset += 2
    return seg, stored


def test_file_names_and_sparse_index(tmp_path: Path) -> None:
    seg, stored = segment_with(tmp_path, 20)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "00000000000000000100.index",
        "00000000000000000100.log",
        "00000000000000000100.timeindex",
    ]
    size = len(stored[0])
    # an entry whenever more than 150 bytes were appended since the last one: every 2nd batch here
    assert size < 150 < 2 * size
    assert seg.offset_index.entries == 9
    assert seg.offset_index.entry(0) == (105, 2 * size)  # LAST offset of the append, its start position
    assert seg.time_index.entry(0) == (TS + 21, 104)


def test_read_and_translate(tmp_path: Path) -> None:
    seg, stored = segment_with(tmp_path, 20)
    size = len(stored[0])
    piece = seg.read(111, 1, seg.size, True)
    assert piece is not None and (piece.position, piece.size) == (5 * size, size)
    assert piece.read() == stored[5]
    assert seg.read(140, 100, seg.size, True) is None  # past the last batch
    assert seg.read(100, 10_000, 3 * size, True).size == 3 * size  # type: ignore[union-attr]
    assert seg.read_next_offset() == 140
    assert seg.find_offset_by_timestamp(TS + 55, 0) == (TS + 60, 112)
    assert seg.find_offset_by_timestamp(TS + 61, 0) == (TS + 61, 113)
    assert seg.find_offset_by_timestamp(TS + 61, 114) == (TS + 70, 114)
    assert seg.find_offset_by_timestamp(TS + 10**6, 0) is None


def test_truncate_and_recover(tmp_path: Path) -> None:
    seg, stored = segment_with(tmp_path, 20)
    size = len(stored[0])
    assert seg.truncate_to(113) == 14 * size  # batch 6 holds 112..113: it goes entirely
    assert seg.size == 6 * size and seg.read_next_offset() == 112
    assert all(seg.offset_index.entry(i)[0] < 113 for i in range(seg.offset_index.entries))
    with open(seg.log_path, "ab") as f:
        f.write(stored[0][:40])  # a torn write after the valid batches
    seg.size = os.path.getsize(seg.log_path)
    headers, truncated = seg.recover()
    assert truncated == 40 and len(headers) == 6 and seg.size == 6 * size
    assert seg.offset_index.entries == 2
    seg.sanity_check()


def test_sanity_check_catches_an_index_past_the_log(tmp_path: Path) -> None:
    seg, _ = segment_with(tmp_path, 20)
    seg.offset_index.trim()
    os.ftruncate(seg.fd, 100)
    seg.size = 100
    with pytest.raises(KafkaError):
        seg.sanity_check()


def test_delete_keeps_fd_until_destroy(tmp_path: Path) -> None:
    seg, stored = segment_with(tmp_path, 3)
    seg.mark_deleted()
    assert sorted(p.suffix for p in tmp_path.iterdir()) == [".deleted"] * 3
    assert os.pread(seg.fd, len(stored[0]), 0) == stored[0]
    seg.destroy()
    assert list(tmp_path.iterdir()) == []


def test_corruption_in_a_middle_segment_drops_the_later_ones(tmp_path: Path) -> None:
    clock = ManualClock()
    log = open_log(tmp_path, clock, **{"segment.bytes": "2000"})
    for i in range(60):
        log.append(memoryview(make_batch(2, tag=i)), leader_epoch=0, now_ms=0)
    assert log.segment_count >= 3
    second = log.segments[1]
    second_end = second.read_next_offset()
    with open(second.log_path, "r+b") as f:
        f.seek(second.size // 2 + 30)
        f.write(b"\xff\xff")
    again = PartitionLog.open(log.directory, log.config, clock, recover=True)
    assert again.segment_count == 2
    assert second.base_offset <= again.log_end_offset < second_end
    assert len(read_all(again)) == again.size_bytes
