"""LogSegment.locate: the tail ring, the offset index + chunked header walk, and both after
truncation, roll, recovery and reopen, against a brute-force scan of the appended batches."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkad.clock import ManualClock
from kafkad.storage import segment as segment_module
from kafkad.storage.records import patch_offset_and_epoch
from kafkad.storage.segment import LogSegment
from tests.unit.storage.test_partition_log_helpers import make_batch, open_log

TS = 1_700_000_000_000
BASE = 1000

# (position, size, base offset, last offset) of each batch in file order.
Layout = list[tuple[int, int, int, int]]


class Writer:
    """Appends batches to a segment the way the log does and remembers where each one went."""

    def __init__(self, seg: LogSegment, next_offset: int) -> None:
        self.seg = seg
        self.next_offset = next_offset
        self.layout: Layout = []

    def append(self, counts: Sequence[int], gap: int = 0, value_size: int = 10) -> None:
        """One segment append of len(counts) batches (one write), the first starting `gap` offsets on."""
        offset = self.next_offset + gap
        first = offset
        data = bytearray()
        position = self.seg.size
        for count in counts:
            b = make_batch(count, ts=TS + offset, value_size=value_size, tag=offset)
            patch_offset_and_epoch(b, 0, offset, 0)
            self.layout.append((position + len(data), len(b), offset, offset + count - 1))
            data += b
            offset += count
        self.seg.append(offset - 1, TS + offset - 1, first, memoryview(data))
        self.next_offset = offset

    def truncate(self, offset: int) -> None:
        self.seg.truncate_to(offset)
        self.layout = [b for b in self.layout if b[3] < offset]
        self.next_offset = min(self.next_offset, offset)  # a batch holding `offset` went whole


def expected(layout: Layout, offset: int) -> tuple[int, int] | None:
    """Brute force: the first batch whose last offset >= offset."""
    for position, size, _, last in layout:
        if last >= offset:
            return position, size
    return None


def expected_read(
    layout: Layout, offset: int, max_size: int, max_position: int, min_one: bool
) -> tuple[int, int] | None:
    """Brute force: (position, size) of LogSegment.read's slice."""
    found = expected(layout, offset)
    if found is None:
        return None
    position, size = found
    if position >= max_position:
        return position, 0
    return position, min(max_position - position, max(max_size, size) if min_one else max_size)


def check_all(seg: LogSegment, layout: Layout) -> None:
    last = layout[-1][3] if layout else seg.base_offset
    for offset in range(seg.base_offset - 1, last + 3):
        want = expected(layout, offset)
        assert seg.locate(offset) == want, offset
        assert seg.start_of(offset) == (None if want is None else want[0]), offset
        # read(): with no read at an append's start of the ring when the append fits max_size
        for max_size in (1, 100, 1 << 20):
            for min_one in (False, True):
                for max_position in (seg.size, seg.size // 2):
                    piece = seg.read(offset, max_size, max_position, min_one)
                    got = None if piece is None else (piece.position, piece.size)
                    assert got == expected_read(layout, offset, max_size, max_position, min_one), (
                        offset,
                        max_size,
                        min_one,
                        max_position,
                    )


def new_segment(directory: Path, interval: int = 4096) -> LogSegment:
    seg = LogSegment(directory, BASE, index_bytes=1 << 16, index_interval_bytes=interval, now_ms=TS)
    seg.resize_indexes(1 << 16)  # a reopened index is trimmed: room to append again, as the log does
    return seg


def count_lookups(seg: LogSegment) -> list[int]:
    """Wrap seg.offset_index.lookup to record the offsets it is asked for."""
    calls: list[int] = []
    original: Callable[[int], tuple[int, int]] = seg.offset_index.lookup

    def lookup(offset: int) -> tuple[int, int]:
        calls.append(offset)
        return original(offset)

    seg.offset_index.lookup = lookup  # type: ignore[method-assign]
    return calls


def small_batches(tmp_path: Path, n: int = 400, interval: int = 4096) -> Writer:
    w = Writer(new_segment(tmp_path, interval), BASE)
    for i in range(n):
        w.append([1 + i % 3])
    return w


def test_every_offset_resolves_and_the_tail_never_asks_the_index(tmp_path: Path) -> None:
    w = small_batches(tmp_path)
    assert w.seg.offset_index.entries > 5  # several index intervals of small batches
    smallest = min(size for _, size, _, _ in w.layout)
    ring = len(w.seg._ring_offsets) + len(w.seg._older_offsets)
    assert ring <= 2 * (4096 // smallest + 2)  # about two index intervals, no more
    calls = count_lookups(w.seg)
    check_all(w.seg, w.layout)
    # the last index.interval.bytes of the log are answered by the ring alone
    tail = [b for b in w.layout if b[0] >= w.seg.size - 4096]
    assert len(tail) > 20
    calls.clear()
    for _, _, base, last in tail:
        for offset in range(base, last + 1):
            w.seg.locate(offset)
    assert calls == []
    assert w.seg.locate(w.next_offset) is None and calls == []  # past the end, no index either


def test_tail_pattern_append_then_locate_each_offset(tmp_path: Path) -> None:
    """A tailing consumer: every offset is asked for right after it is appended."""
    w = Writer(new_segment(tmp_path, interval=300), BASE)
    calls = count_lookups(w.seg)
    for i in range(300):
        w.append([1 + i % 2])
        _, _, base, last = w.layout[-1]
        for offset in range(base, last + 1):
            assert w.seg.locate(offset) == w.layout[-1][:2]
    # only before the ring held two appends (an empty or one-append ring falls back to the index)
    assert len(calls) <= 3
    assert w.seg.offset_index.entries > 20


def test_every_offset_via_the_index_alone(tmp_path: Path) -> None:
    w = small_batches(tmp_path)
    w.seg.clear_tail_ring()
    calls = count_lookups(w.seg)
    check_all(w.seg, w.layout)
    assert len(calls) > len(w.layout)


def test_multi_batch_appends_and_offset_gaps(tmp_path: Path) -> None:
    w = Writer(new_segment(tmp_path, interval=700), BASE)
    for i in range(120):
        w.append([1, 2, 1][: 1 + i % 3], gap=(i % 4 == 0) * 3)  # replicas of compacted logs skip offsets
    check_all(w.seg, w.layout)
    w.seg.clear_tail_ring()
    check_all(w.seg, w.layout)


def test_header_walk_across_16k_chunks(tmp_path: Path) -> None:
    """No index entry and no ring: one walk over many 16 KiB reads, headers straddling their ends."""
    w = Writer(new_segment(tmp_path, interval=1 << 30), BASE)
    for i in range(200):
        w.append([1], value_size=300 + 37 * (i % 11))
    assert w.seg.offset_index.entries == 0 and w.seg.size > 4 * 16384
    w.seg.clear_tail_ring()
    check_all(w.seg, w.layout)


def test_ring_stays_bounded_with_a_huge_index_interval(tmp_path: Path) -> None:
    w = Writer(new_segment(tmp_path, interval=1 << 30), BASE)
    for _ in range(segment_module._RING_MAX * 2 + 7):
        w.append([1], value_size=1)
    for offsets, positions in (
        (w.seg._ring_offsets, w.seg._ring_positions),
        (w.seg._older_offsets, w.seg._older_positions),
    ):
        assert len(offsets) == len(positions) <= segment_module._RING_MAX
    check_all(w.seg, w.layout)


@pytest.mark.parametrize("keep", [0, 1, 57, 199, 398])
def test_truncation_then_more_appends(tmp_path: Path, keep: int) -> None:
    w = small_batches(tmp_path)
    cut = w.layout[keep][2] if keep < len(w.layout) else w.next_offset
    w.truncate(cut)
    assert w.seg.size == (w.layout[-1][0] + w.layout[-1][1] if w.layout else 0)
    check_all(w.seg, w.layout)
    for i in range(90):
        w.append([1 + i % 2])
    check_all(w.seg, w.layout)


def test_truncation_inside_a_multi_batch_append(tmp_path: Path) -> None:
    w = Writer(new_segment(tmp_path), BASE)
    for _ in range(20):
        w.append([1, 1, 1])
    w.truncate(w.layout[-2][2])  # keeps the first batch of the last append
    check_all(w.seg, w.layout)
    w.append([2])
    check_all(w.seg, w.layout)


def test_roll_drops_the_ring_and_the_closed_segment_still_resolves(tmp_path: Path) -> None:
    w = small_batches(tmp_path)
    w.seg.on_becoming_inactive()
    assert (
        w.seg._ring_offsets == w.seg._ring_positions == w.seg._older_offsets == w.seg._older_positions == []
    )
    check_all(w.seg, w.layout)


@pytest.mark.parametrize("recover", [False, True])
def test_reopen_or_recover_starts_with_an_empty_ring(tmp_path: Path, recover: bool) -> None:
    w = small_batches(tmp_path)
    w.seg.close()
    seg = new_segment(tmp_path)
    if recover:
        with open(seg.log_path, "ab") as f:
            f.write(b"\x00" * 20)  # a torn tail that recovery cuts
        seg.size = os.path.getsize(seg.log_path)
        seg.recover()
    assert seg._ring_offsets == seg._older_offsets == []
    w.seg = seg
    check_all(seg, w.layout)
    for i in range(150):
        w.append([1 + i % 3])
    check_all(seg, w.layout)


def test_torn_header_at_the_end_is_not_a_batch(tmp_path: Path) -> None:
    w = small_batches(tmp_path, n=30)
    with open(w.seg.log_path, "ab") as f:
        f.write(b"\x00" * 20)
    w.seg.size += 20
    w.seg.clear_tail_ring()
    check_all(w.seg, w.layout)


def test_partition_log_reads_every_offset_through_roll_truncate_and_delete_records(tmp_path: Path) -> None:
    clock = ManualClock(TS)
    log = open_log(tmp_path, clock, **{"segment.bytes": "6000", "index.interval.bytes": "500"})
    counts: dict[int, int] = {}  # base offset -> records in the batch

    def append(n: int) -> None:
        for i in range(n):
            r = log.append(memoryview(make_batch(1 + i % 2, ts=TS + i, tag=i)), leader_epoch=0, now_ms=TS)
            counts[r.base_offset] = 1 + i % 2

    def first_batch_offsets() -> None:
        # every offset reads from the start of the batch holding it (base offset: the first field)
        for offset in range(log.log_start_offset, log.log_end_offset):
            piece = log.read(offset, 1).slices[0]
            base = int.from_bytes(piece.read()[:8], "big")
            assert base <= offset < base + counts[base]

    append(300)
    assert len(log.segments) >= 4

    first_batch_offsets()
    log.truncate_to(max(b for b in counts if b <= log.log_end_offset - 40))  # a follower: at a batch start
    first_batch_offsets()
    log.high_watermark = log.log_end_offset
    log.delete_records(log.log_end_offset - 100)
    first_batch_offsets()
    append(60)
    first_batch_offsets()
    log.close()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    interval=st.integers(min_value=50, max_value=3000),
    appends=st.lists(
        st.tuples(st.lists(st.integers(1, 4), min_size=1, max_size=3), st.integers(0, 3)),
        min_size=1,
        max_size=80,
    ),
    ops=st.lists(st.tuples(st.sampled_from(["truncate", "reopen", "roll", "append"]), st.floats(0, 1))),
)
def test_locate_matches_a_brute_force_scan(
    tmp_path_factory: pytest.TempPathFactory,
    interval: int,
    appends: list[tuple[list[int], int]],
    ops: list[tuple[str, float]],
) -> None:
    directory = tmp_path_factory.mktemp("seg")
    w = Writer(new_segment(directory, interval), BASE)
    for counts, gap in appends:
        w.append(counts, gap)
    check_all(w.seg, w.layout)
    for op, where in ops:
        if op == "truncate" and w.layout:
            w.truncate(w.layout[int(where * (len(w.layout) - 1))][2 + int(where * 2) % 2])
        elif op == "reopen":
            w.seg.close()
            w.seg = new_segment(directory, interval)
        elif op == "roll":
            w.seg.on_becoming_inactive()
            w.seg.resize_indexes(1 << 16)  # appends may follow here: a segment-level test only
        else:
            for counts, gap in appends[: 1 + int(where * len(appends))]:
                w.append(counts, gap)
        check_all(w.seg, w.layout)
    w.seg.destroy()


@pytest.mark.parametrize(
    ("interval", "appends", "target", "hit"),
    [
        (1 << 20, 4, 3, True),  # no index entry: every append in the newer generation
        (1, 20, 19, True),  # every append indexed: the generations shifted at the 17th; the newest
        (1, 20, 16, True),  # the newer generation's first: its predecessor ends the older generation
        (1, 20, 1, True),  # early in the older generation
        (1, 20, 0, False),  # the first append: no predecessor in the ring
        (1, 40, 36, True),  # shifted twice (appends 0-based 32-39 newer, 16-31 older)
        (1, 40, 10, False),  # dropped from the ring: the index and a header walk
    ],
)
def test_a_fetch_where_an_append_starts_reads_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, interval: int, appends: int, target: int, hit: bool
) -> None:
    """A follower's next fetch (the offset after its log end) starts where one of the ring's appends
    starts: the slice comes from the ring alone, no header pread. Elsewhere (inside an append, or an
    append larger than max_bytes with min_one_batch) the header is read as before. With interval 1 every
    append is indexed, and the ring's generations shift every 16 appends."""
    w = Writer(new_segment(tmp_path, interval=interval), BASE)
    for _ in range(appends):
        w.append([3, 2])  # appends of two batches
    reads: list[int] = []
    real_pread = os.pread

    def counting_pread(fd: int, n: int, position: int) -> bytes:
        reads.append(position)
        return real_pread(fd, n, position)

    monkeypatch.setattr(segment_module.os, "pread", counting_pread)
    first = w.layout[2 * target]  # the first batch of the target append
    end = w.layout[2 * target + 2][0] if target + 1 < appends else w.seg.size
    piece = w.seg.read(first[2], end - first[0], w.seg.size, True)
    assert piece is not None and (piece.position, piece.size) == (first[0], end - first[0])
    assert w.seg.start_of(first[2]) == first[0]
    assert (reads == []) is hit
    reads.clear()
    inside = w.layout[2 * target + 1]  # the second batch of that append: a header walk
    piece = w.seg.read(inside[2], 1 << 20, w.seg.size, True)
    assert piece is not None and piece.position == inside[0]
    assert reads
    reads.clear()
    piece = w.seg.read(first[2], 1, w.seg.size, True)  # max_bytes below the append: the batch's own size
    assert piece is not None and (piece.position, piece.size) == (first[0], first[1])
    assert reads
