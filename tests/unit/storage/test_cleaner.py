"""Log cleaner: latest value per key, tombstones, keyless records, offsets, codecs, checkpoint, selection."""

from __future__ import annotations

from pathlib import Path

from kafkad.clock import ManualClock
from kafkad.storage.checkpoints import read_offsets
from kafkad.storage.cleaner import CLEANER_OFFSET_CHECKPOINT
from kafkad.storage.records import Compression, iter_batches
from tests.unit.storage.test_cleaner_support import (
    cleaner_for,
    keyed,
    latest,
    open_compacted,
    produce,
    read_records,
)


def test_keeps_latest_value_per_key_and_preserves_offsets(tmp_path: Path) -> None:
    clock = ManualClock()
    plog = open_compacted(tmp_path, clock)
    produce(plog, clock, keyed(20, 30))
    plog.roll()
    produce(plog, clock, keyed(20, 1, tag="active"))
    before = read_records(plog)
    active_bytes = plog.active_segment.log_path.read_bytes()
    segments_before, size_before = plog.segment_count, plog.size_bytes
    stats = cleaner_for(plog, clock).clean_all_now()
    assert len(stats) == 1 and stats[0].completed
    after = read_records(plog)
    closed = [r for r in after if r[0] < plog.active_segment.base_offset]
    # One record per key below the active segment: exactly the latest of the closed part.
    expected = latest([r for r in before if r[0] < plog.active_segment.base_offset])
    assert sorted(closed) == sorted(expected.values())
    # Offsets are preserved (every kept record is the original at that offset) and increase.
    original = {r[0]: r for r in before}
    assert all(original[r[0]] == r for r in after)
    assert [r[0] for r in after] == sorted(r[0] for r in after)
    # The active segment is untouched, the log end did not move, the log shrank.
    assert plog.active_segment.log_path.read_bytes() == active_bytes
    assert plog.log_end_offset == before[-1][0] + 1
    assert plog.size_bytes < size_before / 10
    # Groups are formed on the old sizes (Kafka): full segments shrink in place, merged next time.
    assert plog.segment_count == segments_before
    assert stats[0].records_kept == 20 and stats[0].records_read == 600


def test_reads_and_indexes_work_after_cleaning_and_reopen(tmp_path: Path) -> None:
    clock = ManualClock()
    plog = open_compacted(tmp_path, clock)
    produce(plog, clock, keyed(50, 20) + keyed(25, 1, tag="z"))
    plog.roll()
    cleaner_for(plog, clock).clean_all_now()
    kept = read_records(plog)
    assert kept[0][0] == 975  # k25..k49 of the last full round; 950..974 were superseded
    # Fetch from an offset inside the gap: the batch holding the next kept offset answers.
    result = plog.read(960, 1 << 20)
    first = next(iter_batches(result.slices[0].read()))
    assert first.header.last_offset >= 960
    assert kept[0] == (first.records[0].offset, first.records[0].key, first.records[0].value)
    plog.close()
    reopened = open_compacted(tmp_path, clock)
    assert read_records(reopened) == kept
    assert reopened.stats.recovered_segments == 0  # the cleaned indexes passed the sanity checks


def test_tombstones_kept_for_delete_retention_then_dropped(tmp_path: Path) -> None:
    clock = ManualClock()
    plog = open_compacted(tmp_path, clock, overrides={"delete.retention.ms": "60000"})
    produce(plog, clock, [(b"a", b"1"), (b"b", b"1"), (b"a", None)])
    plog.roll()
    cleaner = cleaner_for(plog, clock)
    cleaner.clean_all_now()
    assert {(k, v) for _, k, v in read_records(plog)} == {(b"b", b"1"), (b"a", None)}
    # New dirty data before the horizon: the tombstone survives another cleaning.
    clock.advance(30_000)
    produce(plog, clock, [(b"b", b"2")])
    plog.roll()
    cleaner.clean_all_now()
    assert {(k, v) for _, k, v in read_records(plog)} == {(b"b", b"2"), (b"a", None)}
    # Past the horizon the cleaner picks the log up without new dirty bytes and drops it.
    clock.advance(30_001)
    assert cleaner.clean_all_now()
    assert {(k, v) for _, k, v in read_records(plog)} == {(b"b", b"2")}
    assert cleaner.clean_all_now() == []  # nothing left to do


def test_keyless_records_are_dropped(tmp_path: Path) -> None:
    clock = ManualClock()
    plog = open_compacted(tmp_path, clock)
    produce(plog, clock, [(None, b"x"), (b"k", b"1"), (None, b"y"), (b"k", b"2")], per_batch=4)
    plog.roll()
    cleaner_for(plog, clock).clean_all_now()
    assert read_records(plog) == [(3, b"k", b"2")]


def test_compressed_batches_keep_codec_and_producer(tmp_path: Path) -> None:
    clock = ManualClock()
    plog = open_compacted(tmp_path, clock)
    produce(plog, clock, keyed(5, 4), per_batch=10, compression=Compression.ZSTD, producer_id=7)
    plog.roll()
    batches_before = list(iter_batches(plog.cleanable_segments()[0][0].log_path.read_bytes()))
    cleaner_for(plog, clock).clean_all_now()
    data = b"".join(seg.log_path.read_bytes() for seg, _ in plog.cleanable_segments())
    batches = list(iter_batches(data))  # CRCs verified
    assert batches and all(b.header.compression is Compression.ZSTD for b in batches)
    assert all(b.header.producer_id == 7 and b.header.producer_epoch == 0 for b in batches)
    by_base = {b.header.base_offset: b.header for b in batches_before}
    for b in batches:
        old = by_base[b.header.base_offset]  # base offsets (and so sequences) preserved
        assert b.header.base_sequence == old.base_sequence
        for r in b.records:
            assert r.sequence == old.base_sequence + (r.offset - old.base_offset)
    assert sorted((r.key, r.value) for b in batches for r in b.records) == sorted(
        (f"k{k}".encode(), f"v3-{k}".encode()) for k in range(5)
    )


def test_checkpoint_written_in_kafka_format_and_respected(tmp_path: Path) -> None:
    clock = ManualClock()
    plog = open_compacted(tmp_path, clock, overrides={"min.cleanable.dirty.ratio": "0.5"})
    produce(plog, clock, keyed(10, 40))
    plog.roll()
    end = plog.log_end_offset
    cleaner = cleaner_for(plog, clock)
    cleaner.clean_all_now()
    path = tmp_path / CLEANER_OFFSET_CHECKPOINT
    assert read_offsets(path) == {("t", 0): end}
    assert path.read_text().splitlines()[:3] == ["0", "1", f"t 0 {end}"]
    # A new cleaner (restart) reads it: a small dirty tail under the ratio is left alone...
    produce(plog, clock, keyed(1, 1))
    plog.roll()
    fresh = cleaner_for(plog, clock)
    assert fresh.grab_filthiest() is None
    # ...and once the dirty part dominates, it is cleaned from the checkpoint on.
    produce(plog, clock, keyed(10, 40, tag="w"))
    plog.roll()
    task = fresh.grab_filthiest()
    assert task is not None and task.first_dirty == end and task.dirty_ratio > 0.5


def test_only_compacted_logs_and_closed_segments_are_cleaned(tmp_path: Path) -> None:
    clock = ManualClock()
    plog = open_compacted(tmp_path, clock, overrides={"cleanup.policy": "delete"})
    produce(plog, clock, keyed(5, 20))
    plog.roll()
    assert cleaner_for(plog, clock).grab_filthiest() is None
    other = open_compacted(tmp_path / "x", clock)
    produce(other, clock, keyed(5, 20))  # no roll: everything is in the active segment
    assert cleaner_for(other, clock).grab_filthiest() is None


def test_high_watermark_bounds_the_dirty_section(tmp_path: Path) -> None:
    clock = ManualClock()
    plog = open_compacted(tmp_path, clock)
    produce(plog, clock, keyed(5, 20))
    plog.roll()
    plog.high_watermark = 10  # replication has not acknowledged the closed segment
    assert cleaner_for(plog, clock).grab_filthiest() is None


def test_offset_map_limit_cleans_in_several_passes(tmp_path: Path) -> None:
    clock = ManualClock()
    plog = open_compacted(tmp_path, clock, overrides={"segment.bytes": "1024"})
    produce(plog, clock, [(f"u{i}".encode(), b"v") for i in range(200)])
    plog.roll()
    cleaner = cleaner_for(plog, clock, max_map_entries=50)
    first = cleaner.clean_all_now()
    assert first and first[0].end_offset < plog.log_end_offset  # stopped where the map was full
    while cleaner.clean_all_now():
        pass
    assert cleaner.checkpointed("t", 0) == plog.log_end_offset
    assert [r[1] for r in read_records(plog)] == [f"u{i}".encode() for i in range(200)]


def test_small_segments_are_grouped(tmp_path: Path) -> None:
    clock = ManualClock()
    plog = open_compacted(tmp_path, clock, overrides={"segment.bytes": "8192"})
    for _ in range(6):
        produce(plog, clock, keyed(3, 10))
        plog.roll()
    assert plog.segment_count == 7
    cleaner_for(plog, clock).clean_all_now()
    assert plog.segment_count == 2  # one cleaned group + the active segment
    assert len(read_records(plog)) == 3


def test_a_group_emptied_by_cleaning_stays_readable_and_reopens(tmp_path: Path) -> None:
    clock = ManualClock()
    plog = open_compacted(tmp_path, clock, overrides={"segment.bytes": "2048"})
    produce(plog, clock, keyed(10, 4, tag="old"))  # every value superseded by the next segment
    plog.roll()
    produce(plog, clock, keyed(10, 4, tag="new"))
    plog.roll()
    cleaner_for(plog, clock).clean_all_now()
    first = plog.cleanable_segments()[0][0]
    assert first.base_offset == 0 and first.size == 0  # kept as an empty segment (Kafka does too)
    result = plog.read(0, 1 << 20)
    got = [(r.offset, r.value) for b in iter_batches(result.slices[0].read()) for r in b.records]
    assert got == [(70 + k, f"new3-{k}".encode()) for k in range(10)]
    plog.close()
    reopened = open_compacted(tmp_path, clock, recover=True)
    assert [r[2] for r in read_records(reopened)] == [f"new3-{k}".encode() for k in range(10)]
