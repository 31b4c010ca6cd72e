"""SegmentList: the ordered segments and base offsets of a log, kept in step by every change."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kafkad.storage.segment import LogSegment
from kafkad.storage.segment_list import SegmentList

Make = Callable[[int], LogSegment]


@pytest.fixture
def make(tmp_path: Path) -> Iterator[Make]:
    opened: list[LogSegment] = []

    def new(base: int) -> LogSegment:
        seg = LogSegment(tmp_path, base, index_bytes=4096, index_interval_bytes=4096, now_ms=0)
        opened.append(seg)
        return seg

    yield new
    for seg in opened:
        seg.close()


def _list(make: Make, *bases: int) -> tuple[SegmentList, list[LogSegment]]:
    segs = [make(b) for b in bases]
    return SegmentList(segs), segs


def _bases(sl: SegmentList) -> list[int]:
    return [s.base_offset for s in sl]


def test_lookup_bisects_on_bases(make: Make) -> None:
    sl, segs = _list(make, 0, 10, 25)
    assert len(sl) == 3 and sl.first_base == 0 and sl.active is segs[2]
    assert [sl.index_of(o) for o in (0, 9, 10, 24, 25, 10**9)] == [0, 0, 1, 1, 2, 2]
    assert sl.locate(12) == (1, segs[1], 25)
    assert sl.locate(30) == (2, segs[2], None)
    assert sl.next_base(0) == 10 and sl.next_base(2) is None
    assert sl.end_offset(segs[1], 99) == 25 and sl.end_offset(segs[2], 99) == 99
    assert sl.closed() == [(segs[0], 10), (segs[1], 25)]
    assert sl.from_offset(11) == segs[1:]
    assert sl[1] is segs[1] and list(sl) == segs


def test_offsets_below_the_first_segment_map_to_it(make: Make) -> None:
    sl, segs = _list(make, 100, 200)
    assert sl.index_of(5) == -1
    assert sl.locate(5) == (0, segs[0], 200)
    assert sl.from_offset(5) == segs


def test_roll_appends_and_moves_the_active_segment(make: Make) -> None:
    sl, segs = _list(make, 0)
    new = make(7)
    sl.roll(new)
    assert sl.active is new and _bases(sl) == [0, 7] and sl.closed() == [(segs[0], 7)]
    with pytest.raises(ValueError):
        sl.roll(make(7))
    assert _bases(sl) == [0, 7]


def test_replace_active_keeps_the_order(make: Make) -> None:
    sl, segs = _list(make, 0, 10)
    new = make(20)
    assert sl.replace_active(new) is segs[1]
    assert sl.active is new and _bases(sl) == [0, 20] and sl.index_of(15) == 0
    with pytest.raises(ValueError):
        sl.replace_active(make(0))
    assert sl.active is new


def test_drop_first_never_takes_the_active_segment(make: Make) -> None:
    sl, segs = _list(make, 0, 10)
    assert sl.drop_first() is segs[0]
    assert sl.first_base == 10 and sl.active is segs[1]
    with pytest.raises(ValueError):
        sl.drop_first()
    assert list(sl) == [segs[1]]


def test_truncate_after_removes_newest_first_and_keeps_the_oldest(make: Make) -> None:
    sl, segs = _list(make, 0, 10, 20, 30)
    assert sl.truncate_after(20) == [segs[3]]
    assert sl.active is segs[2]
    assert sl.truncate_after(-5) == [segs[2], segs[1]]
    assert list(sl) == [segs[0]] and sl.active is segs[0] and sl.index_of(50) == 0
    assert sl.truncate_after(-5) == []


def test_replace_run_swaps_a_closed_run_for_one_segment(make: Make) -> None:
    sl, segs = _list(make, 0, 10, 20, 30)
    old = segs[1:3]
    assert sl.run_index(old, 30) == 1
    segs[1].mark_deleted()  # the swap renames the old files away before it replaces them
    assert sl.run_index(old, 30) is None  # no longer live for a new swap to start
    new = make(10)
    assert sl.replace_run(old, new, 30)
    assert list(sl) == [segs[0], new, segs[3]] and sl.closed() == [(segs[0], 10), (new, 30)]
    assert sl.active is segs[3] and sl.locate(25) == (1, new, 30)


def test_replace_run_refuses_a_run_that_changed(make: Make) -> None:
    sl, segs = _list(make, 0, 10, 20)
    assert not sl.replace_run(segs[0:2], make(5), 20)  # other base
    assert not sl.replace_run(segs[0:1], make(0), 20)  # wrong end offset
    assert not sl.replace_run(segs[1:3], make(10), 99)  # includes the active one
    assert not sl.replace_run([], make(0), 10)
    stranger = make(100)
    assert sl.run_index([stranger], 20) is None
    sl.drop_first()  # retention raced the cleaner
    assert sl.run_index(segs[0:1], 10) is None
    assert not sl.replace_run(segs[0:1], make(0), 10)
    assert list(sl) == segs[1:]


def test_reset_returns_the_previous_segments_and_checks_order(make: Make) -> None:
    sl, segs = _list(make, 0, 10)
    other = make(50)
    assert sl.reset([other]) == segs
    assert list(sl) == [other] and sl.active is other and sl.first_base == 50
    assert sl.reset(()) == [other]
    assert len(sl) == 0
    with pytest.raises(AttributeError):
        sl.active  # noqa: B018  # an empty list has no active segment
    with pytest.raises(ValueError):
        sl.reset([make(20), make(20)])
    assert len(sl) == 0


def test_snapshot_is_a_copy(make: Make) -> None:
    sl, segs = _list(make, 0, 10)
    snap = sl.snapshot()
    sl.roll(make(20))
    assert snap == segs and len(sl) == 3
