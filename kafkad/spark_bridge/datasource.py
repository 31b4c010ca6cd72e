"""The `kafkad` PySpark data source: `spark.read.format("kafkad").load(landing_dir)`.

Planning (driver): the landing area's manifests are listed and pruned by the options below (no
`pushFilters`: Spark 4.3 refuses to read from a source that has it unless
`spark.sql.python.filterPushdown.enabled` is set); each remaining segment is one
input partition, a large one cut at batch boundaries into pieces of about `splitBytes` using the
manifest's batch index. Reading (executors): the piece is read from the landing store, CRC-32C checked
against the manifest when it is the whole file, and decoded by `arrow_decode` into
`pyarrow.RecordBatch`es (all codecs, control batches skipped).

Options (all optional):
  topics          comma-separated topic names
  partitions      comma-separated partition numbers
  startingOffset  first offset to return (inclusive), endingOffset: last offset + 1 (exclusive)
  manifests       JSON list of manifest names (relative to the landing root) to read, nothing else
  splitBytes      target bytes per input partition (default 64 MiB)
  verifyCrc       "true"/"false": per-batch CRC and whole-file CRC checks (default true)

Call `register(spark)` once per session before reading.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from crc32c import crc32c
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from kafkad.protocol.errors import ErrorCode, KafkaError
from kafkad.spark_bridge.arrow_decode import decode_segment
from kafkad.spark_bridge.landing import open_landing
from kafkad.spark_bridge.manifest import Manifest

SCHEMA_DDL = (
    "topic string, partition int, offset long, timestamp timestamp, timestamp_type int, "
    "key binary, value binary, headers array<struct<key: string, value: binary>>, date date"
)
DEFAULT_SPLIT_BYTES = 64 * 1024 * 1024
_MAX_OFFSET = (1 << 63) - 1


@dataclass(frozen=True, slots=True)
class SegmentPiece:
    """One input partition: bytes [start, end) of a shipped segment (batch boundaries)."""

    landing_uri: str
    log_name: str
    topic: str
    partition: int
    start: int
    end: int
    size: int  # of the whole file
    crc32c: int


@dataclass(slots=True)
class Selection:
    """What to read, from the options."""

    topics: set[str] | None = None
    partitions: set[int] | None = None
    min_offset: int = 0
    max_offset: int = _MAX_OFFSET  # inclusive
    manifests: list[str] | None = None

    def wants(self, m: Manifest) -> bool:
        if self.topics is not None and m.topic not in self.topics:
            return False
        if self.partitions is not None and m.partition not in self.partitions:
            return False
        if m.record_count == 0:
            return False
        return not (m.last_offset < self.min_offset or m.base_offset > self.max_offset)

    @property
    def filters_offsets(self) -> bool:
        return self.min_offset > 0 or self.max_offset < _MAX_OFFSET


def plan_pieces(manifest: Manifest, landing_uri: str, split_bytes: int) -> list[SegmentPiece]:
    """Cut a segment at indexed batch boundaries into pieces of at least `split_bytes` (the last may be less)."""
    bounds = [0]
    for pos, _offset in manifest.batch_index[1:]:
        if pos - bounds[-1] >= split_bytes and manifest.size - pos >= split_bytes // 4:
            bounds.append(pos)
    bounds.append(manifest.size)
    return [
        SegmentPiece(
            landing_uri,
            manifest.log_name,
            manifest.topic,
            manifest.partition,
            start,
            end,
            manifest.size,
            manifest.crc32c,
        )
        for start, end in itertools.pairwise(bounds)
    ]


def list_manifests(landing_uri: str, names: Sequence[str] | None = None) -> list[Manifest]:
    """Blocking: the manifests of the landing area (or the named ones), in name order."""
    store = open_landing(landing_uri)
    out = []
    for name in store.list_manifests() if names is None else names:
        raw = store.read_bytes(name)
        if raw is None:
            raise FileNotFoundError(f"manifest {name} not found in {landing_uri}")
        out.append(Manifest.from_json(raw))
    return out


def read_piece(
    piece: SegmentPiece, selection: Selection, verify_crc: bool = True
) -> Iterator[pa.RecordBatch]:
    """Executor side: decode one piece into RecordBatches, applying the offset range if any."""
    store = open_landing(piece.landing_uri)
    with store.open_read(piece.log_name) as f:
        f.seek(piece.start)
        data = f.read(piece.end - piece.start)
    if len(data) != piece.end - piece.start:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"{piece.log_name}: short read at {piece.start}")
    if verify_crc and piece.start == 0 and piece.end == piece.size and crc32c(data) != piece.crc32c:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"{piece.log_name}: CRC-32C differs from its manifest")
    for batch in decode_segment(data, piece.topic, piece.partition, verify_crc=verify_crc):
        if selection.filters_offsets:
            offsets = batch.column(2)
            mask = pc.and_(
                pc.greater_equal(offsets, selection.min_offset),
                pc.less_equal(offsets, selection.max_offset),
            )
            batch = batch.filter(mask)
            if batch.num_rows == 0:
                continue
        yield batch


def _csv(value: str | None) -> list[str] | None:
    if value is None or not value.strip():
        return None
    return [v.strip() for v in value.split(",") if v.strip()]


class KafkadReader(DataSourceReader):  # type: ignore[misc,unused-ignore]
    def __init__(self, given: dict[str, str]) -> None:
        options = {k.lower(): v for k, v in given.items()}  # Spark option names are case-insensitive
        self.landing_uri = options.get("path") or options.get("landing") or ""
        if not self.landing_uri:
            raise ValueError("kafkad data source: load(<landing dir>) or option('landing', ...) is required")
        topics = _csv(options.get("topics"))
        parts = _csv(options.get("partitions"))
        manifests = options.get("manifests")
        self.selection = Selection(
            topics=set(topics) if topics else None,
            partitions={int(p) for p in parts} if parts else None,
            min_offset=int(options.get("startingoffset", "0")),
            max_offset=int(options["endingoffset"]) - 1 if "endingoffset" in options else _MAX_OFFSET,
            manifests=list(json.loads(manifests)) if manifests else None,
        )
        self.split_bytes = int(options.get("splitbytes", str(DEFAULT_SPLIT_BYTES)))
        self.verify_crc = options.get("verifycrc", "true").lower() != "false"

    def partitions(self) -> Sequence[InputPartition]:
        manifests = [
            m for m in list_manifests(self.landing_uri, self.selection.manifests) if self.selection.wants(m)
        ]
        pieces = [p for m in manifests for p in plan_pieces(m, self.landing_uri, self.split_bytes)]
        # Spark needs at least one partition; an empty one reads nothing.
        return [InputPartition(p) for p in pieces] or [InputPartition(None)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        piece: SegmentPiece | None = partition.value
        if piece is None:
            return iter(())
        return read_piece(piece, self.selection, self.verify_crc)


class KafkadDataSource(DataSource):  # type: ignore[misc,unused-ignore]
    """`spark.read.format("kafkad").load(landing_dir)` over segments shipped by kafkad's bridge."""

    @classmethod
    def name(cls) -> str:
        return "kafkad"

    def schema(self) -> str:
        return SCHEMA_DDL

    def reader(self, schema: StructType) -> KafkadReader:
        return KafkadReader(dict(self.options))


def register(spark: Any) -> None:
    """Make `format("kafkad")` available in this session."""
    spark.dataSource.register(KafkadDataSource)
