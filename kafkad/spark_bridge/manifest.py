"""Segment manifests: the JSON file that sits next to every shipped `.log` in the landing area.

Landing layout (version 2; names encode site / topic / partition / first and last offset, so a retry
rewrites the same objects and two sites never share a name)::

    <landing>/site=<site>/<topic>/<partition>/<first offset, 20 digits>-<last offset, 20 digits>.log
    <landing>/site=<site>/<topic>/<partition>/<first>-<last>.manifest.json

A shipped object is the tail of a closed segment from its first batch past the shipped position (the
whole segment, usually); its `base_offset` is the first batch's base offset. Version 1 (before sites)
is still read: `<landing>/<topic>/<partition>/<base offset>.log`, with `site` and `cluster_id` None
(the ingest job names that site with `--legacy-site`). Topic names cannot contain `=`, so the two
layouts never collide.

The manifest is written after the data, so its presence means the segment landed completely; readers
(the `kafkad` data source, the ingest job) discover segments by listing manifests only, and
`parse_manifest_name` recovers an object's key from its name alone (the ingest plans without reading
manifests it has already ingested). `batch_index` holds (position, base offset) of batches roughly
every `INDEX_INTERVAL_BYTES`, which lets a reader split a large segment at batch boundaries.
"""

from __future__ import annotations

import json
import mmap
import re
from dataclasses import dataclass
from typing import Any, NamedTuple

from kafkad.storage.crc import crc32c
from kafkad.storage.records import TimestampType, iter_headers

MANIFEST_SUFFIX = ".manifest.json"
LOG_SUFFIX = ".log"
FORMAT_VERSION = 2
LEGACY_VERSION = 1  # before sites: read, never written
INDEX_INTERVAL_BYTES = 4 * 1024 * 1024
SITE_PREFIX = "site="
# A site names a directory: letters, digits, `.`, `_`, `-` (cluster ids qualify), not `.` or `..`.
_SITE_RE = re.compile(r"[A-Za-z0-9._-]{1,255}")


def valid_site(site: str) -> bool:
    return bool(_SITE_RE.fullmatch(site)) and site not in (".", "..")


class ObjectKey(NamedTuple):
    """What a shipped object holds: site (None: the version-1 layout), topic, partition, offsets."""

    site: str | None
    topic: str
    partition: int
    first_offset: int
    last_offset: int  # -1 when only the name of a version-1 object is known


def segment_stem(site: str | None, topic: str, partition: int, first_offset: int, last_offset: int) -> str:
    """Relative name (no suffix): `site=s1/topic/0/<first>-<last>` (`topic/0/<first>` without a site)."""
    if site is None:
        return f"{topic}/{partition}/{first_offset:020d}"
    return f"{SITE_PREFIX}{site}/{topic}/{partition}/{first_offset:020d}-{last_offset:020d}"


_NAME_RE = re.compile(
    r"(?:site=(?P<site>[^/]+)/)?(?P<topic>[^/=]+)/(?P<partition>\d+)/(?P<first>\d{20})(?:-(?P<last>\d{20}))?"
    + re.escape(MANIFEST_SUFFIX)
)


def parse_manifest_name(name: str) -> ObjectKey | None:
    """The key encoded in a manifest's relative name; None if the name is not one of ours."""
    m = _NAME_RE.fullmatch(name)
    if m is None or (m["site"] is None) != (m["last"] is None):
        return None
    last = int(m["last"]) if m["last"] is not None else -1
    return ObjectKey(m["site"], m["topic"], int(m["partition"]), int(m["first"]), last)


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
    site: str | None = None  # None: a version-1 object (before sites)
    cluster_id: str | None = None

    @property
    def key(self) -> ObjectKey:
        return ObjectKey(self.site, self.topic, self.partition, self.base_offset, self.last_offset)

    @property
    def stem(self) -> str:
        return segment_stem(self.site, self.topic, self.partition, self.base_offset, self.last_offset)

    @property
    def log_name(self) -> str:
        return self.stem + LOG_SUFFIX

    @property
    def manifest_name(self) -> str:
        return self.stem + MANIFEST_SUFFIX

    def to_json(self) -> bytes:
        if self.site is None:
            raise ValueError("version-1 manifests (no site) are read, never written")
        body: dict[str, Any] = {
            "version": FORMAT_VERSION,
            "site": self.site,
            "cluster_id": self.cluster_id,
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
        version = d.get("version")
        if version not in (FORMAT_VERSION, LEGACY_VERSION):
            raise ValueError(f"unsupported manifest version {version!r}")
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
            site=str(d["site"]) if version == FORMAT_VERSION else None,
            cluster_id=d.get("cluster_id") if version == FORMAT_VERSION else None,
        )


def build_manifest(
    topic: str,
    partition: int,
    base_offset: int,
    data: bytes | memoryview | mmap.mmap,
    *,
    site: str,
    cluster_id: str | None,
    crc: int | None = None,
    index_interval: int = INDEX_INTERVAL_BYTES,
) -> Manifest:
    """Scan the batch headers of a segment's bytes (no record decode) and describe it.

    `base_offset` is the first batch's base offset (the segment's base when it is empty). `crc` may be
    passed when the caller already computed it while copying.
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
        site=site,
        cluster_id=cluster_id,
    )
