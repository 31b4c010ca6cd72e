"""Property: whatever the history of keyed writes, cleaning keeps exactly the latest record per key of
the closed segments (tombstones until their delete horizon), at its original offset, and never touches
the active segment."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkad.clock import ManualClock
from kafkad.storage.records import Compression
from tests.unit.storage.test_cleaner_support import (
    Item,
    Seen,
    cleaner_for,
    latest,
    open_compacted,
    produce,
    read_records,
)

keys = st.one_of(st.none(), st.sampled_from([b"a", b"b", b"c", b"d", b"e", b"f"]))
values = st.one_of(st.none(), st.binary(min_size=0, max_size=40))
items = st.lists(st.tuples(keys, values), min_size=1, max_size=120)
segments = st.lists(items, min_size=1, max_size=6)


def _expected_closed(history: list[Seen], tombstones: bool) -> list[Seen]:
    last = latest(history)
    return sorted(r for r in last.values() if tombstones or r[2] is not None)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    segments,
    items,
    st.integers(min_value=1, max_value=12),
    st.sampled_from([Compression.NONE, Compression.GZIP, Compression.LZ4, Compression.ZSTD]),
)
def test_cleaning_keeps_latest_per_key(
    closed_parts: list[list[Item]], active_part: list[Item], per_batch: int, codec: Compression
) -> None:
    with tempfile.TemporaryDirectory() as d:
        clock = ManualClock()
        plog = open_compacted(Path(d), clock, overrides={"segment.bytes": "3000"})
        for part in closed_parts:
            produce(plog, clock, part, per_batch=per_batch, compression=codec)
            plog.roll()
        active_base = plog.active_segment.base_offset
        produce(plog, clock, active_part, per_batch=per_batch, compression=codec)
        before = read_records(plog)
        closed_before = [r for r in before if r[0] < active_base]
        active_before = [r for r in before if r[0] >= active_base]
        active_bytes = plog.active_segment.log_path.read_bytes()
        cleaner = cleaner_for(plog, clock)

        cleaner.clean_all_now()
        after = read_records(plog)
        assert [r for r in after if r[0] < active_base] == _expected_closed(closed_before, True)
        assert [r for r in after if r[0] >= active_base] == active_before
        assert plog.active_segment.log_path.read_bytes() == active_bytes
        assert plog.log_end_offset == (before[-1][0] + 1 if before else 0)

        # Past delete.retention.ms the tombstones go; everything else stays.
        clock.advance(60_001)
        cleaner.clean_all_now()
        after = read_records(plog)
        assert [r for r in after if r[0] < active_base] == _expected_closed(closed_before, False)
        plog.close()
        reopened = open_compacted(Path(d), clock)
        assert read_records(reopened) == after
        reopened.close()
