"""Segment shipper: copies closed segments of selected topics to the landing area (runs inside the daemon).

How it works
------------
One worker thread (never the event loop) repeats a *pass* every `poll_interval_ms`:

1. ask the `SegmentSource` for closed segments; keep those of topics matching `bridge.topics` (each
   entry a regex that must match the whole name; empty = every non-internal topic) and newer than the
   partition's checkpointed high mark; ship them per partition in base-offset order;
2. ask it for active segments and `request_roll` those whose first batch is older than
   `bridge.max.segment.age.ms`, so a quiet partition still gets shipped.

Shipping one segment: the `.log` is mmapped (retention may unlink it meanwhile; the mapping keeps the
bytes), copied in chunks through the token bucket (`bridge.rate.limit.bytes.per.sec`) into a
`LandingWriter` that makes it visible only on commit, CRC-32C computed on the way; then the manifest
(built from the batch headers) is put, after the data. Only then is the partition's high mark raised and
the checkpoint file (`bridge-shipped-checkpoint` in the log dir, Kafka's offset-checkpoint format:
`topic partition last-shipped-base-offset`, temp + fsync + rename) rewritten.

Crash/restart: a segment whose copy was interrupted has, at most, a hidden temp file in the landing
area; it is shipped again under the same names (same bytes). A segment that fully landed but whose
checkpoint was not written is recognised on restart by its manifest (same size and CRC) and is not
copied again. Landing errors (`OSError`: root missing, read-only, network store down) are retried with
exponential backoff forever; nothing is skipped, so nothing is lost.

`is_shipped(topic, partition, base_offset)` is thread-safe and cheap: the disk budget asks it before
deleting a segment.
"""

from __future__ import annotations

import logging
import mmap
import os
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from crc32c import crc32c

from kafkad.clock import Clock, SystemClock
from kafkad.spark_bridge.landing import LandingStore
from kafkad.spark_bridge.manifest import Manifest, build_manifest, log_name, manifest_name
from kafkad.spark_bridge.rate_limit import Backoff, Sleep, TokenBucket, chunk_size_for
from kafkad.spark_bridge.segment_source import ClosedSegment, SegmentSource
from kafkad.storage.checkpoints import read_offsets, write_offsets

log = logging.getLogger(__name__)

CHECKPOINT_FILE = "bridge-shipped-checkpoint"


@dataclass(frozen=True, slots=True)
class ShipperConfig:
    topics: tuple[str, ...] = ()  # regexes; empty = every topic not starting with "__"
    rate_limit_bytes_per_sec: int = -1  # -1 = unlimited
    max_segment_age_ms: int = 3_600_000
    poll_interval_ms: int = 5_000
    backoff: Backoff = field(default_factory=Backoff)
    copy_chunk_bytes: int = 1 << 20  # upper bound; a rate limit makes chunks smaller


@dataclass(frozen=True, slots=True)
class ShipResult:
    segment: ClosedSegment
    manifest: Manifest | None  # None: the segment vanished before it could be shipped
    copied: bool  # False when an existing landed copy was recognised


class StopRequested(Exception):
    """The shipper is closing; the current copy was abandoned (it will be redone after restart)."""


class Shipper:
    """Owns the worker thread; `is_shipped` and `stats` may be called from any thread."""

    def __init__(
        self,
        config: ShipperConfig,
        source: SegmentSource,
        landing: LandingStore,
        checkpoint_path: str | os.PathLike[str],
        *,
        clock: Clock | None = None,
        sleep: Sleep | None = None,
        copy_hook: Callable[[ClosedSegment, int], None] | None = None,
        on_shipped: Callable[[ShipResult], None] | None = None,
    ) -> None:
        self.config = config
        self._source = source
        self._landing = landing
        self._checkpoint = Path(checkpoint_path)
        self._clock = clock or SystemClock()
        self._stop = threading.Event()
        self._sleep: Sleep = sleep or (lambda s: not self._stop.wait(s))
        self._copy_hook = copy_hook  # tests: called after each chunk with the bytes copied so far
        self._on_shipped = on_shipped  # e.g. metrics; called from the worker thread
        self._patterns = [re.compile(p) for p in config.topics]
        self._lock = threading.Lock()
        self._shipped: dict[tuple[str, int], int] = read_offsets(self._checkpoint)
        self._roll_requested: set[tuple[str, int, int]] = set()
        self._thread: threading.Thread | None = None
        self._bucket = (
            TokenBucket(
                config.rate_limit_bytes_per_sec,
                chunk_size_for(config.rate_limit_bytes_per_sec, config.copy_chunk_bytes),
                self._clock,
                self._sleep,
            )
            if config.rate_limit_bytes_per_sec > 0
            else None
        )
        self.bytes_shipped = 0
        self.segments_shipped = 0
        self.failures = 0

    # --- queries (any thread) -----------------------------------------------------------------
    def is_shipped(self, topic: str, partition: int, base_offset: int) -> bool:
        with self._lock:
            mark = self._shipped.get((topic, partition))
        return mark is not None and base_offset <= mark

    def wants(self, topic: str) -> bool:
        if not self._patterns:
            return not topic.startswith("__")
        return any(p.fullmatch(topic) for p in self._patterns)

    # --- lifecycle ----------------------------------------------------------------------------
    def start(self) -> None:
        """Start the worker thread (call once)."""
        self._thread = threading.Thread(target=self._run, name="kafkad-bridge-shipper", daemon=True)
        self._thread.start()

    def close(self, timeout_s: float = 10.0) -> None:
        """Blocking: stop the worker; an in-flight copy is abandoned (re-shipped after restart)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.run_once()
            except StopRequested:
                return
            except Exception:  # keep the daemon alive; the next pass retries
                log.exception("bridge shipper pass failed")
            self._stop.wait(self.config.poll_interval_ms / 1000.0)

    # --- one pass (worker thread, or tests directly) ------------------------------------------
    def run_once(self) -> list[ShipResult]:
        """Blocking: ship every pending closed segment, then request rolls of old active segments."""
        results = [self._ship_with_retry(seg) for seg in self.pending()]
        self._request_rolls()
        return results

    def pending(self) -> list[ClosedSegment]:
        segs = [
            s
            for s in self._source.closed_segments()
            if self.wants(s.topic) and not self.is_shipped(s.topic, s.partition, s.base_offset)
        ]
        return sorted(segs, key=lambda s: (s.topic, s.partition, s.base_offset))

    def _request_rolls(self) -> None:
        now = self._clock.time_ms()
        for a in self._source.active_segments():
            if not self.wants(a.topic) or a.size_bytes == 0 or a.created_ms < 0:
                continue
            key = (a.topic, a.partition, a.base_offset)
            if now - a.created_ms >= self.config.max_segment_age_ms and key not in self._roll_requested:
                log.info("bridge: rolling %s-%d (segment %d is too old)", *key)
                self._roll_requested.add(key)
                self._source.request_roll(a.topic, a.partition)

    def _ship_with_retry(self, seg: ClosedSegment) -> ShipResult:
        failures = 0
        exc_: OSError
        while True:
            if self._stop.is_set():
                raise StopRequested
            try:
                result = self.ship(seg)
            except FileNotFoundError as exc:
                if not os.path.exists(seg.path):
                    log.warning("bridge: %s vanished before shipping (retention?): %s", seg.path, exc)
                    self._mark_shipped(seg)
                    return ShipResult(seg, None, False)
                failures, exc_ = failures + 1, exc
            except OSError as exc:
                failures, exc_ = failures + 1, exc
            else:
                return result
            self.failures += 1
            delay = self.config.backoff.delay_ms(failures)
            log.warning(
                "bridge: landing %s unreachable (%s); retry %d in %d ms",
                self._landing.uri,
                exc_,
                failures,
                delay,
            )
            if not self._sleep(delay / 1000.0):
                raise StopRequested

    def ship(self, seg: ClosedSegment) -> ShipResult:
        """Blocking: copy one segment + manifest, then checkpoint it. OSError if the landing fails."""
        with open(seg.path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            # The mapping keeps the bytes readable even if retention unlinks the file meanwhile.
            mapped = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ) if size else None
        data: mmap.mmap | bytes = mapped if mapped is not None else b""
        try:
            manifest = self._landed_manifest(seg, data)
            copied = manifest is None
            if manifest is None:
                manifest = self._copy(seg, data)
        finally:
            if mapped is not None:
                mapped.close()
        self._mark_shipped(seg)
        if copied:
            self.bytes_shipped += manifest.size
            self.segments_shipped += 1
            log.info(
                "bridge: shipped %s-%d@%d (%d records, %d bytes)",
                seg.topic,
                seg.partition,
                seg.base_offset,
                manifest.record_count,
                manifest.size,
            )
        result = ShipResult(seg, manifest, copied)
        if self._on_shipped is not None:
            self._on_shipped(result)
        return result

    def _landed_manifest(self, seg: ClosedSegment, data: mmap.mmap | bytes) -> Manifest | None:
        """The manifest already in the landing area for exactly these bytes (a restart after landing)."""
        raw = self._landing.read_bytes(manifest_name(seg.topic, seg.partition, seg.base_offset))
        if raw is None:
            return None
        try:
            existing = Manifest.from_json(raw)
        except (ValueError, KeyError):
            return None
        if existing.size != len(data) or existing.crc32c != crc32c(data):
            return None
        return existing

    def _copy(self, seg: ClosedSegment, data: mmap.mmap | bytes) -> Manifest:
        chunk = chunk_size_for(self.config.rate_limit_bytes_per_sec, self.config.copy_chunk_bytes)
        writer = self._landing.open_writer(log_name(seg.topic, seg.partition, seg.base_offset))
        crc = 0
        try:
            for start in range(0, len(data), chunk):
                piece = data[start : start + chunk]  # a copy: no buffer export pins the mapping
                if self._bucket is not None and not self._bucket.acquire(len(piece)):
                    raise StopRequested
                writer.write(piece)
                crc = crc32c(piece, crc)
                if self._copy_hook is not None:
                    self._copy_hook(seg, start + len(piece))
            writer.commit()
        except BaseException:
            writer.abort()
            raise
        manifest = build_manifest(seg.topic, seg.partition, seg.base_offset, data, crc=crc)
        self._landing.put_bytes(manifest.manifest_name, manifest.to_json())
        return manifest

    def _mark_shipped(self, seg: ClosedSegment) -> None:
        with self._lock:
            key = (seg.topic, seg.partition)
            self._shipped[key] = max(self._shipped.get(key, -1), seg.base_offset)
            snapshot = dict(self._shipped)
        write_offsets(self._checkpoint, snapshot)


def shipper_from_settings(
    *,
    landing: LandingStore,
    source: SegmentSource,
    log_dir: str | os.PathLike[str],
    topics: Sequence[str],
    rate_limit_bytes_per_sec: int,
    max_segment_age_ms: int,
    poll_interval_ms: int = 5_000,
) -> Shipper:
    """Convenience for the daemon: the checkpoint lives in `log_dir` (the first of `log.dirs`)."""
    cfg = ShipperConfig(
        topics=tuple(topics),
        rate_limit_bytes_per_sec=rate_limit_bytes_per_sec,
        max_segment_age_ms=max_segment_age_ms,
        poll_interval_ms=poll_interval_ms,
    )
    return Shipper(cfg, source, landing, Path(log_dir) / CHECKPOINT_FILE)
