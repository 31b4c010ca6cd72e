"""Planning a read of the landing area: which offsets to take from which shipped object, each once.

A *stream* is (site, topic, partition). Objects of one stream may overlap: the same segment shipped
twice across a leader change, or two leaders' tails with different boundaries. `assign` walks a
stream's objects by first offset (the longest first on a tie) and gives each one only the offset
ranges that neither the ledger (`covered`: what earlier runs ingested) nor an earlier object of this
plan already holds, so every offset is read from exactly one object. Ranges are inclusive
`(first, last)` pairs, kept merged and sorted.

Objects are then cut into pieces at indexed batch boundaries (`plan_pieces`) and small pieces are
packed into input partitions of about `split_bytes` (`pack`): a landing of thousands of small
segments gives a few Spark tasks, not one per segment.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from kafkad.spark_bridge.manifest import Manifest

Range = tuple[int, int]  # inclusive
StreamKey = tuple[str, str, int]  # site, topic, partition


def merge(ranges: Iterable[Range]) -> list[Range]:
    """Sorted, merged ranges (adjacent ones joined: offsets are integers)."""
    out: list[Range] = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1] + 1:
            if hi > out[-1][1]:
                out[-1] = (out[-1][0], hi)
        else:
            out.append((lo, hi))
    return out


def subtract(lo: int, hi: int, covered: Sequence[Range]) -> list[Range]:
    """The parts of [lo, hi] outside `covered` (merged and sorted)."""
    out: list[Range] = []
    i = max(0, bisect.bisect_right(covered, (lo, hi)) - 1)
    cur = lo
    for a, b in itertools.islice(covered, i, None):
        if a > hi:
            break
        if b < cur:
            continue
        if a > cur:
            out.append((cur, a - 1))
        cur = b + 1
        if cur > hi:
            return out
    out.append((cur, hi))
    return out


def covers(covered: Sequence[Range], lo: int, hi: int) -> bool:
    return not subtract(lo, hi, covered)


@dataclass(frozen=True, slots=True)
class Assignment:
    manifest: Manifest
    ranges: tuple[Range, ...]  # the offsets this object contributes


def assign(
    manifests: Iterable[Manifest], covered: Sequence[Range] = ()
) -> tuple[list[Assignment], list[Range]]:
    """One stream's objects -> (what to read from each, covered ranges afterwards)."""
    cov = merge(covered)
    out = []
    for m in sorted(manifests, key=lambda m: (m.base_offset, -m.last_offset)):
        if m.last_offset < m.base_offset:
            continue  # no batch at all
        parts = subtract(m.base_offset, m.last_offset, cov)
        if not parts:
            continue
        cov = merge([*cov, *parts])
        if m.record_count > 0:  # control batches only: covered, nothing to read
            out.append(Assignment(m, tuple(parts)))
    return out, cov


@dataclass(frozen=True, slots=True)
class SegmentPiece:
    """Bytes [start, end) of a shipped object (batch boundaries), and the offsets to keep from them."""

    landing_uri: str
    log_name: str
    site: str
    cluster_id: str | None
    topic: str
    partition: int
    start: int
    end: int
    size: int  # of the whole file
    crc32c: int
    ranges: tuple[Range, ...] = ()  # empty: every record

    def to_json(self) -> dict[str, Any]:
        return {
            "u": self.landing_uri,
            "n": self.log_name,
            "s": self.site,
            "c": self.cluster_id,
            "t": self.topic,
            "p": self.partition,
            "b": [self.start, self.end, self.size, self.crc32c],
            "r": [list(r) for r in self.ranges],
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> SegmentPiece:
        start, end, size, crc = d["b"]
        ranges = tuple((int(a), int(b)) for a, b in d["r"])
        return cls(d["u"], d["n"], d["s"], d["c"], d["t"], int(d["p"]), start, end, size, crc, ranges)


def plan_pieces(
    manifest: Manifest,
    landing_uri: str,
    split_bytes: int,
    *,
    site: str,
    ranges: tuple[Range, ...] = (),
) -> list[SegmentPiece]:
    """Cut an object at indexed batch boundaries into pieces of at least `split_bytes`; pieces whose
    batches lie wholly outside `ranges` are dropped."""
    bounds = [(0, manifest.base_offset)]
    for pos, offset in manifest.batch_index[1:]:
        if pos - bounds[-1][0] >= split_bytes and manifest.size - pos >= split_bytes // 4:
            bounds.append((pos, offset))
    bounds.append((manifest.size, manifest.last_offset + 1))
    whole = (manifest.base_offset, manifest.last_offset)
    out = []
    for (start, first), (end, nxt) in itertools.pairwise(bounds):
        if ranges and subtract(first, nxt - 1, ranges) == [(first, nxt - 1)]:
            continue  # every offset of this piece is outside the ranges
        keep = () if ranges == (whole,) else ranges
        out.append(
            SegmentPiece(
                landing_uri,
                manifest.log_name,
                site,
                manifest.cluster_id,
                manifest.topic,
                manifest.partition,
                start,
                end,
                manifest.size,
                manifest.crc32c,
                keep,
            )
        )
    return out


def pack(pieces: Sequence[SegmentPiece], split_bytes: int) -> list[list[SegmentPiece]]:
    """Consecutive pieces grouped into input partitions of up to about `split_bytes` each."""
    out: list[list[SegmentPiece]] = []
    size = 0
    for p in pieces:
        n = p.end - p.start
        if not out or size + n > split_bytes:
            out.append([])
            size = 0
        out[-1].append(p)
        size += n
    return out
