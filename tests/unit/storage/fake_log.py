"""A fake ManagedLog + opener for LogManager unit tests (the real PartitionLog has its own tests).

State that a real log keeps on disk (segments, offsets) lives in the opener's `disk` dict, so a second
LogManager over the same dirs "reopens" it; every open is recorded to check recovery decisions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafkad.storage.log_config import LogConfig
from kafkad.storage.managed_log import OpenRequest, SegmentInfo


@dataclass
class FakeSegment:
    base_offset: int
    next_offset: int
    size_bytes: int
    max_timestamp_ms: int


@dataclass
class FakeDisk:
    segments: list[FakeSegment] = field(default_factory=lambda: [FakeSegment(0, 0, 0, -1)])


class FakeDetached:
    def __init__(self, path: Path, seg: FakeSegment, deleted: list[int]) -> None:
        self._path = path
        self._seg = seg
        self._deleted = deleted

    @property
    def size_bytes(self) -> int:
        return self._seg.size_bytes

    def delete(self) -> None:
        (self._path / f"{self._seg.base_offset:020d}.log").unlink()
        self._deleted.append(self._seg.base_offset)


class FakeLog:
    def __init__(self, req: OpenRequest, disk: FakeDisk) -> None:
        self.topic = req.topic
        self.partition = req.partition
        self.path = req.path
        self._config = req.config
        self.disk = disk
        self._log_start = max(req.log_start_offset, disk.segments[0].base_offset)
        self._hw = req.high_watermark
        self._recovery_point = req.recovery_point
        self.flushes = 0
        self.closed: list[bool] = []
        self.deleted: list[int] = []
        self.appends = 0

    # test helpers
    def add_segment(self, size: int, max_ts: int, count: int = 10) -> None:
        """Fill the active segment (size, timestamp, `count` offsets) and roll a new empty one."""
        active = self.disk.segments[-1]
        active.size_bytes, active.max_timestamp_ms = size, max_ts
        active.next_offset = active.base_offset + count
        (self.path / f"{active.base_offset:020d}.log").write_bytes(b"")
        self.disk.segments.append(FakeSegment(active.next_offset, active.next_offset, 0, -1))
        self._hw = active.next_offset

    def set_offsets(self, *, recovery_point: int, log_start: int, hw: int) -> None:
        self._recovery_point, self._log_start, self._hw = recovery_point, log_start, hw

    @property
    def config(self) -> LogConfig:
        return self._config

    @property
    def log_start_offset(self) -> int:
        return self._log_start

    @property
    def log_end_offset(self) -> int:
        return self.disk.segments[-1].next_offset

    @property
    def high_watermark(self) -> int:
        return self._hw

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    def size_bytes(self) -> int:
        return sum(s.size_bytes for s in self.disk.segments)

    def closed_segments(self) -> Sequence[SegmentInfo]:
        return [
            SegmentInfo(s.base_offset, s.next_offset, s.size_bytes, s.max_timestamp_ms)
            for s in self.disk.segments[:-1]
        ]

    def detach_segments_through(self, base_offset: int) -> Sequence[FakeDetached]:
        gone = [s for s in self.disk.segments[:-1] if s.base_offset <= base_offset]
        self.disk.segments = self.disk.segments[len(gone) :]
        self._log_start = max(self._log_start, self.disk.segments[0].base_offset)
        return [FakeDetached(self.path, s, self.deleted) for s in gone]

    def update_config(self, config: LogConfig) -> None:
        self._config = config

    def append(self, records: memoryview, **kwargs: Any) -> Any:
        self.appends += 1
        return len(records)

    def flush(self) -> None:
        self.flushes += 1
        self._recovery_point = self.log_end_offset

    def close(self, *, snapshot: bool = True) -> None:
        self.closed.append(snapshot)


class FakeOpener:
    def __init__(self) -> None:
        self.disk: dict[tuple[str, int], FakeDisk] = {}
        self.requests: list[OpenRequest] = []

    def __call__(self, req: OpenRequest) -> FakeLog:
        self.requests.append(req)
        disk = self.disk.setdefault((req.topic, req.partition), FakeDisk())
        return FakeLog(req, disk)
