"""Segment manifests: the JSON file that sits next to every shipped `.log` in the landing area.

Landing layout (names encode topic / partition / base offset, so a retry rewrites the same objects)::

    <landing>/<topic>/<partition>/<base offset, 20 digits>.log
    <landing>/<topic>/<partition>/<base offset, 20 digits>.manifest.json

The manifest is written after the data, so its presence means the segment landed completely; readers
(the `kafkad` data source, the ingest job) discover segments by listing manifests only. `batch_index`
holds (position, base offset) of batches roughly every `INDEX_INTERVAL_BYTES`, which lets a reader
split a large segment at batch boundaries without reading it.
"""

from __future__ import annotations

import json
import mmap
from dataclasses import dataclass
from typing import Any

from crc32c import crc32c

from kafkad.storage.records import TimestampType, iter_headers

MANIFEST_SUFFIX = ".manifest.json"
LOG_SUFFIX = ".log"
FORMAT_VERSION = 1
INDEX_INTERVAL_BYTES = 4 * 1024 * 1024


def segment_stem(topic: str, partition: int, base_offset: int) -> str:
    """Relative name (no suffix) of a shipped segment: `topic/partition/00000000000000000042`."""
    return f"{topic}/{partition}/{base_offset:020d}"


def log_name(topic: str, partition: int, base_offset: int) -> str:
    return segment_stem(topic, partition, base_offset) + LOG_SUFFIX


def manifest_name(topic: str, partition: int, base_offset: int) -> str:
    return segment_stem(topic, partition, base_offset) + MANIFEST_SUFFIX


@dataclass(frozen=True, slots=True)
class Manifest:
    """What a reader needs to know about one shipped segment without opening it."""

    topic: str
    partition: int
    base_offset: int
    last_offset: int  # -1 if the segment holds no batch
    record_count: int  # data records (control batches excluded)
    batch_count: int
    first_timestamp: int  # -1 if no data record
    last_timestamp: int  # max timestamp over data batches, -1 if none
    size: int  # bytes of the .log as shipped
    crc32c: int  # CRC-32C (Castagnoli) of the whole .log
    batch_index: tuple[tuple[int, int], ...] = ()  # (position, base offset), first batch included

    @property
    def key(self) -> tuple[str, int, int]:
        return (self.topic, self.partition, self.base_offset)

    @property
    def log_name(self) -> str:
        return log_name(self.topic, self.partition, self.base_offset)

    @property
    def manifest_name(self) -> str:
        return manifest_name(self.topic, self.partition, self.base_offset)

    def to_json(self) -> bytes:
        body: dict[str, Any] = {
            "version": FORMAT_VERSION,
            "topic": self.topic,
            "partition": self.partition,
            "base_offset": self.base_offset,
            "last_offset": self.last_offset,
            "record_count": self.record_count,
            "batch_count": self.batch_count,
            "first_timestamp": self.first_timestamp,
            "last_timestamp": self.last_timestamp,
            "size": self.size,
            "crc32c": self.crc32c,
            "batch_index": [list(e) for e in self.batch_index],
        }
        return json.dumps(body, separators=(",", ":")).encode() + b"\n"

    @classmethod
    def from_json(cls, data: bytes | str) -> Manifest:
        d = json.loads(data)
        if d.get("version") != FORMAT_VERSION:
            raise ValueError(f"unsupported manifest version {d.get('version')!r}")
        return cls(
            topic=str(d["topic"]),
            partition=int(d["partition"]),
            base_offset=int(d["base_offset"]),
            last_offset=int(d["last_offset"]),
            record_count=int(d["record_count"]),
            batch_count=int(d["batch_count"]),
            first_timestamp=int(d["first_timestamp"]),
            last_timestamp=int(d["last_timestamp"]),
            size=int(d["size"]),
            crc32c=int(d["crc32c"]),
            batch_index=tuple((int(p), int(o)) for p, o in d.get("batch_index", [])),
        )


def build_manifest(
    topic: str,
    partition: int,
    base_offset: int,
    data: bytes | memoryview | mmap.mmap,
    *,
    crc: int | None = None,
    index_interval: int = INDEX_INTERVAL_BYTES,
) -> Manifest:
    """Scan the batch headers of a segment's bytes (no record decode) and describe it.

    `crc` may be passed when the caller already computed it while copying.
    """
    last_offset = -1
    records = 0
    batches = 0
    first_ts = -1
    last_ts = -1
    index: list[tuple[int, int]] = []
    next_index_at = 0
    for h in iter_headers(data):  # type: ignore[arg-type]  # mmap supports the buffer protocol
        batches += 1
        last_offset = h.last_offset
        if h.position >= next_index_at:
            index.append((h.position, h.base_offset))
            next_index_at = h.position + index_interval
        if h.is_control:
            continue
        records += h.records_count
        if first_ts < 0:
            first_ts = (
                h.max_timestamp if h.timestamp_type is TimestampType.LOG_APPEND_TIME else h.base_timestamp
            )
        last_ts = max(last_ts, h.max_timestamp)
    return Manifest(
        topic=topic,
        partition=partition,
        base_offset=base_offset,
        last_offset=last_offset,
        record_count=records,
        batch_count=batches,
        first_timestamp=first_ts,
        last_timestamp=last_ts,
        size=len(data),
        crc32c=crc32c(data) if crc is None else crc,
        batch_index=tuple(index),
    )
