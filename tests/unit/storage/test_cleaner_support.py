"""Helpers for the log cleaner tests (no tests here): a one-log source, keyed produce, full reads."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

from kafkad.clock import ManualClock
from kafkad.storage.cleaner import CleanerConfig, LogCleaner
from kafkad.storage.log_config import LogConfig
from kafkad.storage.partition_log import PartitionLog
from kafkad.storage.records import Compression, SimpleRecord, build_batch, iter_batches

Item = tuple[bytes | None, bytes | None]  # (key, value); value None = tombstone
Seen = tuple[int, bytes | None, bytes | None]  # (offset, key, value)

COMPACT = {
    "cleanup.policy": "compact",
    "segment.bytes": "4096",
    "min.cleanable.dirty.ratio": "0.01",
    "delete.retention.ms": "60000",
    "index.interval.bytes": "256",
    "file.delete.delay.ms": "0",
}


class OneLogSource:
    """LogSource over logs opened by the test (log dir = the partition dir's parent)."""

    def __init__(self, *logs: PartitionLog) -> None:
        self.by_tp = {(p.topic, p.partition): p for p in logs}

    def logs(self) -> Iterator[PartitionLog]:
        return iter(list(self.by_tp.values()))

    def log_dir_of(self, topic: str, partition: int) -> str | None:
        plog = self.by_tp.get((topic, partition))
        return None if plog is None else str(plog.directory.parent)

    def get(self, topic: str, partition: int) -> PartitionLog | None:
        return self.by_tp.get((topic, partition))


def open_compacted(
    root: Path, clock: ManualClock, *, recover: bool = False, overrides: dict[str, str] | None = None
) -> PartitionLog:
    config = LogConfig().with_overrides({**COMPACT, **(overrides or {})})
    plog = PartitionLog.open(root / "t-0", config, clock, recover=recover)
    plog.high_watermark = plog.log_end_offset
    return plog


def cleaner_for(plog: PartitionLog, clock: ManualClock, max_map_entries: int = 1_000_000) -> LogCleaner:
    return LogCleaner(OneLogSource(plog), clock, CleanerConfig(max_map_entries=max_map_entries))


def produce(
    plog: PartitionLog,
    clock: ManualClock,
    items: Sequence[Item],
    *,
    per_batch: int = 5,
    compression: Compression = Compression.NONE,
    producer_id: int = -1,
) -> None:
    """Append `items` in batches of `per_batch` records; the high watermark follows the log end."""
    for i in range(0, len(items), per_batch):
        chunk = items[i : i + per_batch]
        seq = -1
        if producer_id >= 0:
            seq = (
                plog.producer_state.producers[producer_id].batches[-1].last_seq + 1
                if (producer_id in plog.producer_state.producers)
                else 0
            )
        raw = build_batch(
            [SimpleRecord(k, v, timestamp=clock.time_ms()) for k, v in chunk],
            compression=compression,
            producer_id=producer_id,
            producer_epoch=0 if producer_id >= 0 else -1,
            base_sequence=seq,
        )
        plog.append(memoryview(bytearray(raw)), leader_epoch=0, now_ms=clock.time_ms())
        clock.advance(1)
    plog.high_watermark = plog.log_end_offset


def read_records(plog: PartitionLog) -> list[Seen]:
    """Every record of the log, in order, read through the log's segment files."""
    out: list[Seen] = []
    for seg in [*plog.cleanable_segments(), (plog.active_segment, plog.log_end_offset)]:
        data = seg[0].log_path.read_bytes()
        for batch in iter_batches(data):
            out += [(r.offset, r.key, r.value) for r in batch.records]
    return out


def latest(items_with_offsets: Sequence[Seen]) -> dict[bytes, Seen]:
    """Key -> its last record (offset, key, value)."""
    out: dict[bytes, Seen] = {}
    for rec in items_with_offsets:
        if rec[1] is not None:
            out[rec[1]] = rec
    return out


def keyed(n_keys: int, rounds: int, tag: str = "v") -> list[Item]:
    return [(f"k{k}".encode(), f"{tag}{r}-{k}".encode()) for r in range(rounds) for k in range(n_keys)]
