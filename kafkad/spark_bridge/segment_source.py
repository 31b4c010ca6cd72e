"""Where the shipper finds segments: a narrow `SegmentSource` protocol and a directory-scanning source.

The shipper calls a source from its worker thread only, so implementations must be thread-safe and
must not touch event-loop state without a hand-off (an adapter over the daemon's LogManager snapshots
its segment lists, which are only appended/replaced under the GIL, and schedules `request_roll` with
`loop.call_soon_threadsafe`).

`DirectorySegmentSource` reads Kafka's layout under each log dir (`<topic>-<partition>/<base>.log`):
the segment with the highest base offset of a partition is the active one, every other is closed.
It is what tests and offline tools use; it also works against a live broker's dirs because closed
segments never change.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import os
import struct
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TypeVar

from kafkad.storage.records import BATCH_OVERHEAD, BatchHeader, TimestampType, read_header

_LOG_SUFFIX = ".log"
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class ClosedSegment:
    """A rolled segment: immutable from now on (retention may still delete it)."""

    topic: str
    partition: int
    base_offset: int
    path: str  # the .log file
    end_offset: int = -1  # the next segment's base offset (nothing of this one reaches it), -1 unknown


@dataclass(frozen=True, slots=True)
class ActiveSegment:
    topic: str
    partition: int
    base_offset: int
    size_bytes: int
    created_ms: int  # when the segment got its first batch (its roll clock), -1 if empty


class SegmentSource(Protocol):
    def closed_segments(self) -> Sequence[ClosedSegment]:
        """Every closed segment of every partition (any order)."""
        ...

    def active_segments(self) -> Sequence[ActiveSegment]: ...

    def request_roll(self, topic: str, partition: int) -> None:
        """Ask the partition log to roll its active segment soon (it may refuse an empty one)."""
        ...


def parse_partition_dir(name: str) -> tuple[str, int] | None:
    """`topic-3` -> ("topic", 3); None for anything else (e.g. `topic-3.deleted`)."""
    topic, sep, part = name.rpartition("-")
    if not sep or not topic or not part.isdigit():
        return None
    return topic, int(part)


def _base(path: Path) -> int:
    return int(path.name[: -len(_LOG_SUFFIX)])


def _first_batch_time(path: Path) -> int:
    """Kafka's roll clock: the first batch's max timestamp (base timestamp for CreateTime works too)."""
    try:
        with open(path, "rb") as f:
            head = f.read(BATCH_OVERHEAD)
        if len(head) < BATCH_OVERHEAD:
            return -1
        h = read_header(head)
        return h.max_timestamp if h.timestamp_type is TimestampType.LOG_APPEND_TIME else h.base_timestamp
    except (OSError, struct.error, ValueError):
        return -1
    except Exception:  # KafkaError on a torn/garbage header: treat as unknown age
        return -1


class DirectorySegmentSource:
    """Blocking: scans the log dirs on every call (call from the shipper thread)."""

    def __init__(
        self,
        log_dirs: Sequence[str | os.PathLike[str]],
        on_roll_request: Callable[[str, int], None] | None = None,
    ) -> None:
        self._dirs = [Path(d) for d in log_dirs]
        self._on_roll = on_roll_request
        self.roll_requests: list[tuple[str, int]] = []

    def _partitions(self) -> list[tuple[str, int, list[Path]]]:
        out = []
        for d in self._dirs:
            try:
                entries = list(os.scandir(d))
            except FileNotFoundError:
                continue
            for e in entries:
                tp = parse_partition_dir(e.name) if e.is_dir() else None
                if tp is None:
                    continue
                logs = sorted(
                    Path(e.path) / f
                    for f in os.listdir(e.path)
                    if f.endswith(_LOG_SUFFIX) and f[: -len(_LOG_SUFFIX)].isdigit()
                )
                if logs:
                    out.append((tp[0], tp[1], logs))
        return out

    def closed_segments(self) -> list[ClosedSegment]:
        return [
            ClosedSegment(topic, partition, _base(p), str(p), _base(nxt))
            for topic, partition, logs in self._partitions()
            for p, nxt in itertools.pairwise(logs)
        ]

    def active_segments(self) -> list[ActiveSegment]:
        out = []
        for topic, partition, logs in self._partitions():
            p = logs[-1]
            try:
                size = p.stat().st_size
            except FileNotFoundError:
                continue
            out.append(ActiveSegment(topic, partition, _base(p), size, _first_batch_time(p)))
        return out

    def request_roll(self, topic: str, partition: int) -> None:
        self.roll_requests.append((topic, partition))
        if self._on_roll is not None:
            self._on_roll(topic, partition)


class _SegmentLike(Protocol):
    @property
    def base_offset(self) -> int: ...
    @property
    def next_offset(self) -> int: ...


class _ActiveLike(Protocol):
    @property
    def base_offset(self) -> int: ...
    @property
    def size(self) -> int: ...
    @property
    def created_ms(self) -> int: ...
    def header_at(self, position: int) -> BatchHeader: ...


class PartitionLogLike(Protocol):
    """What the adapter needs of `kafkad.storage.PartitionLog`."""

    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...
    @property
    def directory(self) -> Path: ...
    @property
    def high_watermark(self) -> int: ...
    @property
    def active_segment(self) -> _ActiveLike: ...
    def closed_segments(self) -> Sequence[_SegmentLike]: ...
    def roll(self) -> object: ...


class LogsLike(Protocol):
    """What the adapter needs of `kafkad.storage.LogManager`."""

    def logs(self) -> Iterator[PartitionLogLike]: ...


class LogManagerSegmentSource:
    """The daemon's source: the LogManager's partition logs, read on their event loop.

    Closed segments are offered once wholly below the high watermark (in a cluster, replicated to the
    ISR: what a new leader keeps; standalone, the high watermark is the log end).

    Partition logs live on the event loop, so every call hops there (`call_soon_threadsafe`) and the
    shipper thread waits for the snapshot; with `loop=None` (tests, offline tools) it calls directly.
    """

    def __init__(
        self, manager: LogsLike, loop: asyncio.AbstractEventLoop | None, timeout_s: float = 30.0
    ) -> None:
        self._manager = manager
        self._loop = loop
        self._timeout = timeout_s

    def _on_loop(self, fn: Callable[[], T]) -> T:
        if self._loop is None:
            return fn()
        fut: concurrent.futures.Future[T] = concurrent.futures.Future()

        def run() -> None:
            try:
                fut.set_result(fn())
            except BaseException as exc:
                fut.set_exception(exc)

        self._loop.call_soon_threadsafe(run)
        return fut.result(self._timeout)

    def closed_segments(self) -> list[ClosedSegment]:
        def snapshot() -> list[ClosedSegment]:
            return [
                ClosedSegment(
                    log.topic,
                    log.partition,
                    s.base_offset,
                    str(log.directory / f"{s.base_offset:020d}{_LOG_SUFFIX}"),
                    s.next_offset,  # the next segment's base offset
                )
                for log in self._manager.logs()
                for s in log.closed_segments()
                if s.next_offset <= log.high_watermark  # a follower may still truncate above it
            ]

        return self._on_loop(snapshot)

    def active_segments(self) -> list[ActiveSegment]:
        def snapshot() -> list[ActiveSegment]:
            out = []
            for log in self._manager.logs():
                seg = log.active_segment
                created = -1
                if seg.size:
                    h = seg.header_at(0)
                    created = h.max_timestamp if h.max_timestamp >= 0 else seg.created_ms
                out.append(ActiveSegment(log.topic, log.partition, seg.base_offset, seg.size, created))
            return out

        return self._on_loop(snapshot)

    def request_roll(self, topic: str, partition: int) -> None:
        def roll() -> None:
            for log in self._manager.logs():
                if log.topic == topic and log.partition == partition:
                    log.roll()

        if self._loop is None:
            roll()
        else:
            self._loop.call_soon_threadsafe(roll)
