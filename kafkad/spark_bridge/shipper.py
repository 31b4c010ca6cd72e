"""Segment shipper: copies closed segments of selected topics to the landing area (runs inside the daemon).

How it works
------------
One worker thread (never the event loop) repeats a *pass* every `poll_interval_ms`:

1. ask the `SegmentSource` for closed segments; keep those of topics matching `bridge.topics` (each
   entry a regex that must match the whole name; empty = every non-internal topic) that the position
   store lets this broker ship (`may_ship`: a cluster's leader) and that reach past the partition's
   shipped position (an offset, see `position.py`); ship them per partition in base-offset order;
2. ask it for active segments and `request_roll` those whose first batch is older than
   `bridge.max.segment.age.ms`, so a quiet partition still gets shipped.

Shipping one segment: the `.log` is mmapped (retention may unlink it meanwhile; the mapping keeps the
bytes); the object shipped is the segment from its first batch whose last offset reaches the shipped
position (the whole segment unless another broker shipped part of it under other boundaries). Its
manifest (batch headers scanned, CRC-32C; site and cluster id) names it
`site=<site>/<topic>/<partition>/<first>-<last>`; the bytes are copied in chunks through the token
bucket (`bridge.rate.limit.bytes.per.sec`) into a `LandingWriter` that makes them visible only on
commit, then the manifest is put, after the data. Only then is the position advanced to the segment's
end (the next segment's base offset) in the `ShippedPositionStore`.

Crash/restart: a segment whose copy was interrupted has, at most, a hidden temp file in the landing
area (on an object store: an incomplete upload, which no listing shows, or an object without its
manifest); it is shipped again under the same names (same bytes). A segment that fully landed but whose
position was not stored is recognised on restart by its manifest (same size and CRC) and is not
copied again. Landing errors (`OSError`: root missing, read-only, network store down) are retried with
exponential backoff forever; nothing is skipped, so nothing is lost.

`is_shipped(topic, partition, base_offset)` is thread-safe and cheap: the disk budget asks it before
deleting a segment (shipped = the segment's end is at or below the shipped position).
"""

from __future__ import annotations

import dataclasses
import logging
import mmap
import os
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from kafkad.clock import Clock, SystemClock
from kafkad.spark_bridge.landing import LandingStore
from kafkad.spark_bridge.manifest import SITE_PREFIX, Manifest, build_manifest, valid_site
from kafkad.spark_bridge.position import LocalPositionStore, ShippedPositionStore
from kafkad.spark_bridge.rate_limit import Backoff, Sleep, TokenBucket, chunk_size_for
from kafkad.spark_bridge.segment_source import ClosedSegment, SegmentSource
from kafkad.storage.records import iter_headers

log = logging.getLogger(__name__)

_NO_END = (1 << 63) - 1
SITE_MARKER = "_cluster_id"  # in site=<site>/: the cluster that ships the site


@dataclass(frozen=True, slots=True)
class ShipperConfig:
    site: str  # `bridge.site`: names the landing subtree and every row; default the cluster id
    cluster_id: str | None = None
    topics: tuple[str, ...] = ()  # regexes; empty = every topic not starting with "__"
    rate_limit_bytes_per_sec: int = -1  # -1 = unlimited
    max_segment_age_ms: int = 3_600_000
    poll_interval_ms: int = 5_000
    backoff: Backoff = field(default_factory=Backoff)
    copy_chunk_bytes: int = 1 << 20  # upper bound; a rate limit makes chunks smaller

    def __post_init__(self) -> None:
        if not valid_site(self.site):
            raise ValueError(f"site {self.site!r}: use letters, digits, '.', '_' and '-' only")


@dataclass(frozen=True, slots=True)
class ShipResult:
    segment: ClosedSegment
    manifest: Manifest | None  # None: vanished before it could be shipped, or nothing past the position
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
        positions: ShippedPositionStore,
        *,
        clock: Clock | None = None,
        sleep: Sleep | None = None,
        copy_hook: Callable[[ClosedSegment, int], None] | None = None,
        on_shipped: Callable[[ShipResult], None] | None = None,
    ) -> None:
        self.config = config
        self._source = source
        self._landing = landing
        self._positions = positions
        self._clock = clock or SystemClock()
        self._stop = threading.Event()
        self._sleep: Sleep = sleep or (lambda s: not self._stop.wait(s))
        self._copy_hook = copy_hook  # tests: called after each chunk with the bytes copied so far
        self._on_shipped = on_shipped  # e.g. metrics; called from the worker thread
        self._patterns = [re.compile(p) for p in config.topics]
        self._lock = threading.Lock()
        self._ends: dict[tuple[str, int, int], int] = {}  # closed segment -> its end, from the last pass
        self._site_ok = False
        self._roll_requested: set[tuple[str, int, int]] = set()
        self._thread: threading.Thread | None = None
        self._bucket = self._new_bucket(config)
        self.bytes_shipped = 0
        self.segments_shipped = 0
        self.failures = 0

    # --- queries (any thread) -----------------------------------------------------------------
    def is_shipped(self, topic: str, partition: int, base_offset: int) -> bool:
        with self._lock:
            end = self._ends.get((topic, partition, base_offset))
        if end is None:
            return False  # the active segment, or one rolled since the last pass
        position = self._positions.position(topic, partition)
        return position is not None and end <= position

    def wants(self, topic: str) -> bool:
        if not self._patterns:
            return not topic.startswith("__")
        return any(p.fullmatch(topic) for p in self._patterns)

    # --- lifecycle ----------------------------------------------------------------------------
    def _new_bucket(self, config: ShipperConfig) -> TokenBucket | None:
        rate = config.rate_limit_bytes_per_sec
        if rate <= 0:
            return None
        return TokenBucket(rate, chunk_size_for(rate, config.copy_chunk_bytes), self._clock, self._sleep)

    def set_rate_limit(self, rate_bytes_per_sec: int) -> None:
        """A new bandwidth cap (-1: none), live (a dynamic broker config); the next chunk copied obeys it."""
        self.config = dataclasses.replace(self.config, rate_limit_bytes_per_sec=rate_bytes_per_sec)
        self._bucket = self._new_bucket(self.config)

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
        results = [self._ship_with_retry(seg) for seg in self.pending()] if self._site_claimed() else []
        self._request_rolls()
        return results

    def _site_claimed(self) -> bool:
        """Whether the site's subtree belongs to this cluster: `site=<site>/_cluster_id`, written by its
        first shipper. Another cluster's id there (two clusters given one `bridge.site`) ships nothing:
        their offsets would collide, and the ingest would keep only one cluster's records."""
        cid = self.config.cluster_id
        if self._site_ok or cid is None:
            return True
        name = f"{SITE_PREFIX}{self.config.site}/{SITE_MARKER}"
        try:
            got = self._landing.read_bytes(name)
            if got is None:
                self._landing.put_bytes(name, cid.encode())
                got = self._landing.read_bytes(name)
        except OSError:
            return True  # unreachable: the copies back off and retry; checked again next pass
        if got is not None and got.decode() != cid:
            self.failures += 1
            log.error(
                "bridge: site %s in %s belongs to cluster %s, not ours (%s): nothing is shipped; "
                "give each cluster its own bridge.site",
                self.config.site,
                self._landing.uri,
                got.decode(),
                cid,
            )
            return False
        self._site_ok = True
        return True

    def pending(self) -> list[ClosedSegment]:
        """Closed segments to ship (and remembers every closed segment's end for `is_shipped`)."""
        closed = [s for s in self._source.closed_segments() if self.wants(s.topic)]
        ends = {(s.topic, s.partition, s.base_offset): s.end_offset for s in closed if s.end_offset >= 0}
        if isinstance(self._positions, LocalPositionStore) and self._positions.has_legacy:
            bases: dict[tuple[str, int], list[int]] = {}
            for s in closed:
                bases.setdefault((s.topic, s.partition), []).extend((s.base_offset, s.end_offset))
            self._positions.adopt_legacy({k: sorted(set(v)) for k, v in bases.items()})
        with self._lock:
            self._ends = ends
        out = []
        allowed: dict[tuple[str, int], bool] = {}
        for s in closed:
            tp = (s.topic, s.partition)
            if tp not in allowed:
                self._positions.refresh(*tp)  # followers too: their retention gate reads it
                allowed[tp] = self._positions.may_ship(*tp)
            position = self._positions.position(*tp)
            end = s.end_offset if s.end_offset >= 0 else _NO_END
            if allowed[tp] and (position is None or end > position):
                out.append(s)
        return sorted(out, key=lambda s: (s.topic, s.partition, s.base_offset))

    def _request_rolls(self) -> None:
        now = self._clock.time_ms()
        for a in self._source.active_segments():
            if not self.wants(a.topic) or a.size_bytes == 0 or a.created_ms < 0:
                continue
            if not self._positions.may_ship(a.topic, a.partition):
                continue  # a follower: its leader rolls and ships
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
                    if seg.end_offset >= 0:
                        self._positions.advance(seg.topic, seg.partition, seg.end_offset)
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
        """Blocking: copy one segment (from the shipped position on) + manifest, then advance the position.

        OSError if the landing fails. A segment with nothing past the position only advances it.
        """
        with open(seg.path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            # The mapping keeps the bytes readable even if retention unlinks the file meanwhile.
            mapped = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ) if size else None
        try:
            manifest, copied = self._ship_bytes(seg, mapped if mapped is not None else b"")
        finally:
            if mapped is not None:
                mapped.close()
        end = seg.end_offset if seg.end_offset >= 0 else (manifest.last_offset + 1 if manifest else -1)
        if end >= 0 and not self._positions.advance(seg.topic, seg.partition, end):
            log.warning("bridge: %s-%d is shipped by another broker now (fenced)", seg.topic, seg.partition)
        if copied and manifest is not None:
            self.bytes_shipped += manifest.size
            self.segments_shipped += 1
            log.info(
                "bridge: shipped %s-%d@%d (%d records, %d bytes)",
                seg.topic,
                seg.partition,
                manifest.base_offset,
                manifest.record_count,
                manifest.size,
            )
        result = ShipResult(seg, manifest, copied)
        if self._on_shipped is not None:
            self._on_shipped(result)
        return result

    def _ship_bytes(self, seg: ClosedSegment, data: mmap.mmap | bytes) -> tuple[Manifest | None, bool]:
        """(manifest, copied) for the part of `data` past the shipped position; (None, False) if none."""
        position = self._positions.position(seg.topic, seg.partition) or 0
        headers = iter_headers(data)  # type: ignore[arg-type]  # mmap supports the buffer protocol
        first = next((h for h in headers if h.last_offset >= position), None)
        if first is None:
            return None, False
        # Usually the whole segment: the mapping itself (no copy); a tail only after a leader change.
        body: mmap.mmap | bytes = data if first.position == 0 else data[first.position :]
        cfg = self.config
        manifest = build_manifest(
            seg.topic, seg.partition, first.base_offset, body, site=cfg.site, cluster_id=cfg.cluster_id
        )
        if self._landed(manifest):
            return manifest, False
        self._copy(seg, body, manifest)
        return manifest, True

    def _landed(self, manifest: Manifest) -> bool:
        """Whether exactly these bytes already landed (a restart after landing, before the position)."""
        raw = self._landing.read_bytes(manifest.manifest_name)
        if raw is None:
            return False
        try:
            existing = Manifest.from_json(raw)
        except (ValueError, KeyError):
            return False
        return existing.size == manifest.size and existing.crc32c == manifest.crc32c

    def _copy(self, seg: ClosedSegment, data: mmap.mmap | bytes, manifest: Manifest) -> None:
        chunk = chunk_size_for(self.config.rate_limit_bytes_per_sec, self.config.copy_chunk_bytes)
        writer = self._landing.open_writer(manifest.log_name)
        try:
            for start in range(0, len(data), chunk):
                piece = data[start : start + chunk]  # a copy: no buffer export pins the mapping
                if self._bucket is not None and not self._bucket.acquire(len(piece)):
                    raise StopRequested
                writer.write(piece)
                if self._copy_hook is not None:
                    self._copy_hook(seg, start + len(piece))
            writer.commit()
        except BaseException:
            writer.abort()
            raise
        self._landing.put_bytes(manifest.manifest_name, manifest.to_json())
