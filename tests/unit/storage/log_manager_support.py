"""Helpers for the LogManager tests: a recording opener over the real PartitionLog, and log filling."""

from __future__ import annotations

from pathlib import Path

from kafkad.clock import Clock, ManualClock
from kafkad.storage.disk_budget import ShippedCheck, UsageProbe, everything_shipped, statvfs_usage
from kafkad.storage.log_config import LogConfig
from kafkad.storage.log_manager import LogManager
from kafkad.storage.log_manager_config import LogManagerConfig
from kafkad.storage.log_opener import OpenRequest, default_opener
from kafkad.storage.partition_log import PartitionLog
from kafkad.storage.records import SimpleRecord, build_batch


class RecordingOpener:
    """default_opener, remembering every request (to check which partitions were recovered)."""

    def __init__(self) -> None:
        self.requests: list[OpenRequest] = []

    def __call__(self, req: OpenRequest, clock: Clock) -> PartitionLog:
        self.requests.append(req)
        return default_opener(req, clock)


def make(
    tmp_path: Path,
    clock: ManualClock | None = None,
    opener: RecordingOpener | None = None,
    *,
    usage_probe: UsageProbe = statvfs_usage,
    is_shipped: ShippedCheck = everything_shipped,
    log_dirs_max_bytes: int = -1,
    log_dirs_min_free_percent: float = 0.0,
    recovery_point_flush_ms: int = 0,
) -> LogManager:
    """A loaded LogManager over two log dirs, tmp_path/d1 and tmp_path/d2."""
    config = LogManagerConfig(
        log_dirs=(str(tmp_path / "d1"), str(tmp_path / "d2")),
        log_dirs_max_bytes=log_dirs_max_bytes,
        log_dirs_min_free_percent=log_dirs_min_free_percent,
        recovery_point_flush_ms=recovery_point_flush_ms,
    )
    lm = LogManager(
        config,
        LogConfig(),
        clock or ManualClock(),
        opener=opener or RecordingOpener(),
        usage_probe=usage_probe,
        is_shipped=is_shipped,
    )
    lm.load()
    return lm


def batch(count: int = 1, timestamp: int = -1, value: bytes = b"v" * 100) -> memoryview:
    return memoryview(bytearray(build_batch([SimpleRecord(value=value, timestamp=timestamp)] * count)))


def add_segments(plog: PartitionLog, timestamps: list[int], now_ms: int, count: int = 10) -> int:
    """One closed segment of `count` records per timestamp; returns the size of one segment."""
    for ts in timestamps:
        plog.append(batch(count, ts), leader_epoch=0, now_ms=now_ms)
        plog.roll()
    plog.high_watermark = plog.log_end_offset
    return plog.closed_segments()[-1].size_bytes


def bases(plog: PartitionLog | None) -> list[int]:
    assert plog is not None
    return [s.base_offset for s in plog.closed_segments()]
