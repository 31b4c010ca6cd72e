"""What the LogManager needs from a partition log, as a narrow Protocol, and how it opens one.

The LogManager codes against `ManagedLog` rather than PartitionLog's full surface: offsets for the
checkpoints, the closed segments for retention and the disk budget, detaching old segments, flush and
close. `default_opener` opens kafkad's PartitionLog; tests pass a fake opener.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from kafkad.storage.log_config import LogConfig


@dataclass(frozen=True, slots=True)
class SegmentInfo:
    """A closed segment: its offsets [base_offset, next_offset), bytes, and max timestamp (or file mtime)."""

    base_offset: int
    next_offset: int
    size_bytes: int
    max_timestamp_ms: int


class DetachedSegment(Protocol):
    """A segment removed from its log whose files still exist (fds open for in-flight reads)."""

    @property
    def size_bytes(self) -> int: ...

    def delete(self) -> None:
        """Blocking: close its files and unlink them."""
        ...


class ManagedLog(Protocol):
    topic: str
    partition: int

    @property
    def config(self) -> LogConfig: ...
    @property
    def log_start_offset(self) -> int: ...
    @property
    def log_end_offset(self) -> int: ...
    @property
    def high_watermark(self) -> int: ...
    @property
    def recovery_point(self) -> int: ...

    def size_bytes(self) -> int:
        """Bytes of all its segments (in memory, cheap)."""
        ...

    def closed_segments(self) -> Sequence[SegmentInfo]:
        """Every segment but the active one, oldest first (in memory, cheap)."""
        ...

    def detach_segments_through(self, base_offset: int) -> Sequence[DetachedSegment]:
        """Loop-safe: drop the closed segments with base <= base_offset from the log, advancing the log
        start offset to the next segment's base; the files stay until DetachedSegment.delete()."""
        ...

    def update_config(self, config: LogConfig) -> None: ...

    def append(self, records: memoryview, **kwargs: Any) -> Any: ...

    def flush(self) -> None:
        """Blocking: fsync everything up to the log end; the recovery point becomes the log end."""
        ...

    def close(self, *, snapshot: bool = True) -> None:
        """Blocking: write the producer-state snapshot (if `snapshot`) and close every file."""
        ...


@dataclass(frozen=True, slots=True)
class OpenRequest:
    """Everything needed to open one partition dir (offsets come from the log dir's checkpoints)."""

    path: Path
    topic: str
    partition: int
    config: LogConfig
    recovery_point: int
    log_start_offset: int
    high_watermark: int
    recover: bool  # False after a clean shutdown: trust the files, rebuild nothing


class LogOpener(Protocol):
    def __call__(self, req: OpenRequest) -> ManagedLog:
        """Blocking: open (and with req.recover, recover) the log in req.path, creating files if new."""
        ...


def default_opener(req: OpenRequest) -> ManagedLog:
    """Blocking: open kafkad's PartitionLog for `req`."""
    # Imported late: the LogManager and its tests do not need PartitionLog's whole import graph.
    partition_log = importlib.import_module("kafkad.storage.partition_log")
    opened: ManagedLog = partition_log.PartitionLog.open(
        req.path,
        topic=req.topic,
        partition=req.partition,
        config=req.config,
        recovery_point=req.recovery_point,
        log_start_offset=req.log_start_offset,
        high_watermark=req.high_watermark,
        recover=req.recover,
    )
    return opened
