from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkad.protocol.errors import KafkaError
from kafkad.storage.offset_index import IndexFullError, OffsetIndex
from kafkad.storage.time_index import TimeIndex

BASE = 1000


def reference_floor(entries: list[tuple[int, int]], key: int) -> tuple[int, int] | None:
    best = None
    for k, v in entries:
        if k <= key:
            best = (k, v)
    return best


@settings(max_examples=100, deadline=None)
@given(
    deltas=st.lists(st.integers(1, 1000), min_size=0, max_size=200),
    probes=st.lists(st.integers(-10, 250_000), min_size=1, max_size=30),
)
def test_offset_index_lookup_matches_plain_dict(
    tmp_path_factory: pytest.TempPathFactory, deltas: list[int], probes: list[int]
) -> None:
    path = tmp_path_factory.mktemp("idx") / "00000000000000001000.index"
    index = OffsetIndex(path, BASE, 8 * 300)
    expected: dict[int, int] = {}
    offset, position = BASE, 0
    for d in deltas:
        offset += d
        position += d * 3
        index.append(offset, position)
        expected[offset] = position
    entries = sorted(expected.items())
    for probe in probes:
        target = BASE + probe
        floor = reference_floor(entries, target)
        assert index.lookup(target) == (floor if floor else (BASE, 0))
    # truncation keeps exactly the entries below the cut
    if entries:
        cut = entries[len(entries) // 2][0]
        index.truncate_to(cut)
        assert [index.entry(i)[0] for i in range(index.entries)] == [k for k, _ in entries if k < cut]
        entries = [(k, v) for k, v in entries if k < cut]
        for extra in range(1, 70):  # append after truncation, across a summary stride
            index.append(cut + extra, 10**6 + extra)
            entries.append((cut + extra, 10**6 + extra))
        for probe in probes:
            floor = reference_floor(entries, BASE + probe)
            assert index.lookup(BASE + probe) == (floor if floor else (BASE, 0))
    index.close()


@settings(max_examples=100, deadline=None)
@given(
    steps=st.lists(st.tuples(st.integers(-5, 50), st.integers(0, 20)), max_size=100),
    probe=st.integers(0, 3000),
)
def test_time_index_lookup_matches_reference(
    tmp_path_factory: pytest.TempPathFactory, steps: list[tuple[int, int]], probe: int
) -> None:
    path = tmp_path_factory.mktemp("tidx") / "x.timeindex"
    index = TimeIndex(path, BASE, 12 * 200)
    kept: list[tuple[int, int]] = []
    ts, offset = 0, BASE
    for dts, doff in steps:
        ts += dts
        offset += doff
        index.maybe_append(ts, offset)
        if not kept or ts > kept[-1][0]:
            kept.append((ts, offset))
    assert [index.entry(i) for i in range(index.entries)] == kept
    floor = reference_floor(kept, probe)
    assert index.lookup(probe) == (floor if floor else (-1, BASE))
    index.close()


def test_preallocated_then_trimmed_and_reopened(tmp_path: Path) -> None:
    path = tmp_path / "a.index"
    index = OffsetIndex(path, 0, 1003)
    assert os.path.getsize(path) == 1000  # rounded down to the entry size
    assert index.max_entries == 125
    for i in range(1, 11):
        index.append(i * 10, i * 100)
    index.close()
    assert os.path.getsize(path) == 80
    again = OffsetIndex(path, 0, 1000)
    assert again.entries == 10
    assert again.lookup(55) == (50, 500)
    again.sanity_check()
    again.resize(1000)
    assert again.entries == 10 and again.max_entries == 125
    again.close()


def test_untrimmed_preallocated_index_fails_sanity_check(tmp_path: Path) -> None:
    path = tmp_path / "b.index"
    index = OffsetIndex(path, 0, 800)
    index.append(10, 100)
    index.append(20, 200)
    index.fsync()
    # simulate a crash: the file keeps its preallocated zero tail
    reopened = OffsetIndex(path, 0, 800)
    assert reopened.entries == 100
    with pytest.raises(KafkaError):
        reopened.sanity_check()


def test_full_and_non_increasing_appends(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "c.index", 0, 16)
    index.append(1, 0)
    with pytest.raises(KafkaError):
        index.append(1, 10)
    index.append(2, 10)
    assert index.is_full
    with pytest.raises(IndexFullError):
        index.append(3, 20)
    with pytest.raises(KafkaError):
        OffsetIndex(tmp_path / "d.index", 0, 16).append(2**31, 0)  # relative offset must fit int32


def test_time_index_final_entry_beyond_capacity(tmp_path: Path) -> None:
    index = TimeIndex(tmp_path / "e.timeindex", 0, 12)
    index.maybe_append(5, 1)
    assert index.is_full
    index.maybe_append(9, 3, skip_full_check=True)  # the roll-time entry always fits
    assert index.last_entry() == (9, 3)


def test_time_index_newest_entry_follows_truncate_reset_and_reopen(tmp_path: Path) -> None:
    """maybe_append compares with a cached newest entry: it must follow every change of the count."""
    path = tmp_path / "0.timeindex"
    index = TimeIndex(path, 100, 12 * 10)
    for ts, offset in ((10, 100), (20, 105), (30, 110)):
        index.maybe_append(ts, offset)
    index.maybe_append(25, 111)  # not newer than 30: ignored
    assert index.entries == 3
    index.truncate_to(110)  # drops (30, 110): 25 is newer than the new newest entry (20, 105)
    index.maybe_append(25, 111)
    assert [index.entry(i) for i in range(index.entries)] == [(10, 100), (20, 105), (25, 111)]
    with pytest.raises(KafkaError):
        index.maybe_append(40, 104)  # offset below the newest entry's
    index.close()
    reopened = TimeIndex(path, 100, 12 * 10)
    reopened.maybe_append(25, 112)  # the reopened index knows its newest entry is 25
    assert reopened.entries == 3
    reopened.reset()
    reopened.maybe_append(5, 100)
    assert reopened.entry(0) == (5, 100) and reopened.entries == 1
    reopened.close()
