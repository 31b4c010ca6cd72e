"""The `kafkad` PySpark data source: `spark.read.format("kafkad").load(landing_dir)`.

Planning (driver): the landing area's manifests are listed and pruned by the options below (no
`pushFilters`: Spark 4.3 refuses to read from a source that has it unless
`spark.sql.python.filterPushdown.enabled` is set); overlapping objects of one (site, topic,
partition) are resolved by `plan.assign`, so every offset is read once; each object is cut at batch
boundaries into pieces of about `splitBytes` using the manifest's batch index, and small pieces are
packed into input partitions of about `splitBytes`. Reading (executors): each piece is read from the
landing store, CRC-32C checked against the manifest when it is the whole file, decoded by
`arrow_decode` into `pyarrow.RecordBatch`es (all codecs, control batches skipped) and filtered to its
offset ranges; `site` and `cluster_id` columns come from the manifest.

Options (all optional):
  sites           comma-separated site names
  topics          comma-separated topic names
  partitions      comma-separated partition numbers
  startingOffset  first offset to return (inclusive), endingOffset: last offset + 1 (exclusive)
  manifests       JSON list of manifest names (relative to the landing root) to read, nothing else
  planFile        a JSON file of pieces (`SegmentPiece.to_json`) to read as they are (the ingest job)
  legacySite      the site of objects shipped before sites existed (default "legacy")
  splitBytes      target bytes per input partition (default 64 MiB)
  verifyCrc       "true"/"false": per-batch CRC and whole-file CRC checks (default true)

Call `register(spark)` once per session before reading.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from kafkad.protocol.errors import ErrorCode, KafkaError
from kafkad.spark_bridge.arrow_decode import decode_segment, repeated_string
from kafkad.spark_bridge.damaged import marker
from kafkad.spark_bridge.landing import LandingStore, open_landing
from kafkad.spark_bridge.manifest import Manifest
from kafkad.spark_bridge.plan import SegmentPiece, StreamKey, assign, pack, plan_pieces
from kafkad.storage.crc import crc32c

SCHEMA_DDL = (
    "site string, cluster_id string, topic string, partition int, offset long, timestamp timestamp, timestamp_type int, "
    "key binary, value binary, headers array<struct<key: string, value: binary>>, date date"
)
DEFAULT_SPLIT_BYTES = 64 * 1024 * 1024
_MAX_OFFSET = (1 << 63) - 1
LEGACY_SITE = "legacy"
COALESCE_ROWS = 32_768


@dataclass(slots=True)
class Selection:
    """What to read, from the options."""

    sites: set[str] | None = None
    legacy_site: str = LEGACY_SITE
    topics: set[str] | None = None
    partitions: set[int] | None = None
    min_offset: int = 0
    max_offset: int = _MAX_OFFSET  # inclusive
    manifests: list[str] | None = None

    def site_of(self, m: Manifest) -> str:
        return m.site if m.site is not None else self.legacy_site

    def wants(self, m: Manifest) -> bool:
        if self.sites is not None and self.site_of(m) not in self.sites:
            return False
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


def plan_landing(
    landing_uri: str, manifests: Sequence[Manifest], selection: Selection, split_bytes: int
) -> list[list[SegmentPiece]]:
    """Input partitions reading every selected offset of the landing once."""
    streams: dict[StreamKey, list[Manifest]] = {}
    for m in manifests:
        if selection.wants(m):
            streams.setdefault((selection.site_of(m), m.topic, m.partition), []).append(m)
    pieces = []
    for (site, _t, _p), ms in sorted(streams.items()):
        for a in assign(ms)[0]:
            pieces += plan_pieces(a.manifest, landing_uri, split_bytes, site=site, ranges=a.ranges)
    return pack(pieces, split_bytes)


def _site_columns(piece: SegmentPiece, batch: pa.RecordBatch) -> pa.RecordBatch:
    n = batch.num_rows
    site = repeated_string(piece.site, n)
    cluster = pa.nulls(n, pa.string()) if piece.cluster_id is None else repeated_string(piece.cluster_id, n)
    return pa.RecordBatch.from_arrays(
        [site, cluster, *batch.columns], names=["site", "cluster_id", *batch.schema.names]
    )


def read_piece(
    piece: SegmentPiece, selection: Selection, verify_crc: bool = True
) -> Iterator[pa.RecordBatch]:
    """Executor side: decode one piece into RecordBatches, keeping its offset ranges and the selection's.

    A damaged object (short, CRC or batch checks failing, missing) raises a KafkaError naming its
    full key between `damaged.marker`'s brackets; an unreachable store raises its OSError as is."""
    store = open_landing(piece.landing_uri)
    try:
        yield from _read_piece(store, piece, selection, verify_crc)
    except (KafkaError, FileNotFoundError) as e:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"{marker(store.key(piece.log_name))}: {e}") from e


def _read_piece(
    store: LandingStore, piece: SegmentPiece, selection: Selection, verify_crc: bool
) -> Iterator[pa.RecordBatch]:
    with store.open_read(piece.log_name) as f:
        f.seek(piece.start)
        data = f.read(piece.end - piece.start)
    if len(data) != piece.end - piece.start:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"{piece.log_name}: short read at {piece.start}")
    if verify_crc and piece.start == 0 and piece.end == piece.size and crc32c(data) != piece.crc32c:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"{piece.log_name}: CRC-32C differs from its manifest")
    for batch in decode_segment(data, piece.topic, piece.partition, verify_crc=verify_crc):
        offsets = batch.column(2)
        mask = None
        if piece.ranges:
            mask = _in_ranges(offsets, piece.ranges)
        if selection.filters_offsets:
            window = pc.and_(
                pc.greater_equal(offsets, selection.min_offset),
                pc.less_equal(offsets, selection.max_offset),
            )
            mask = window if mask is None else pc.and_(mask, window)
        if mask is not None:
            batch = batch.filter(mask)
            if batch.num_rows == 0:
                continue
        yield _site_columns(piece, batch)


def coalesce(batches: Iterator[pa.RecordBatch], rows: int) -> Iterator[pa.RecordBatch]:
    """Join small batches (one per small segment) into batches of about `rows`: each batch handed
    to Spark has a fixed cost, which thousands of 50-record segments would otherwise pay each."""
    pending: list[pa.RecordBatch] = []
    count = 0
    for b in batches:
        pending.append(b)
        count += b.num_rows
        if count >= rows:
            yield _joined(pending)
            pending, count = [], 0
    if pending:
        yield _joined(pending)


def _joined(batches: list[pa.RecordBatch]) -> pa.RecordBatch:
    if len(batches) == 1:
        return batches[0]
    joined: pa.RecordBatch = pa.Table.from_batches(batches).combine_chunks().to_batches()[0]
    return joined


def _in_ranges(offsets: pa.Array, ranges: tuple[tuple[int, int], ...]) -> pa.Array:
    mask = None
    for lo, hi in ranges:
        one = pc.and_(pc.greater_equal(offsets, lo), pc.less_equal(offsets, hi))
        mask = one if mask is None else pc.or_(mask, one)
    return mask


def _csv(value: str | None) -> list[str] | None:
    if value is None or not value.strip():
        return None
    return [v.strip() for v in value.split(",") if v.strip()]


class KafkadReader(DataSourceReader):  # type: ignore[misc,unused-ignore]
    def __init__(self, given: dict[str, str]) -> None:
        options = {k.lower(): v for k, v in given.items()}  # Spark option names are case-insensitive
        landing = options.get("path") or options.get("landing") or ""
        if not landing:
            raise ValueError("kafkad data source: load(<landing dir>) or option('landing', ...) is required")
        # Resolved on the driver (an S3 landing's endpoint and region), so executors reach the same store.
        self.landing_uri = open_landing(landing).uri
        topics = _csv(options.get("topics"))
        parts = _csv(options.get("partitions"))
        sites = _csv(options.get("sites"))
        manifests = options.get("manifests")
        self.plan_file = options.get("planfile")
        self.selection = Selection(
            sites=set(sites) if sites else None,
            legacy_site=options.get("legacysite", LEGACY_SITE),
            topics=set(topics) if topics else None,
            partitions={int(p) for p in parts} if parts else None,
            min_offset=int(options.get("startingoffset", "0")),
            max_offset=int(options["endingoffset"]) - 1 if "endingoffset" in options else _MAX_OFFSET,
            manifests=list(json.loads(manifests)) if manifests else None,
        )
        self.split_bytes = int(options.get("splitbytes", str(DEFAULT_SPLIT_BYTES)))
        self.verify_crc = options.get("verifycrc", "true").lower() != "false"

    def partitions(self) -> Sequence[InputPartition]:
        if self.plan_file:
            with open(self.plan_file, "rb") as f:
                pieces = [SegmentPiece.from_json(d) for d in json.load(f)]
            groups = pack(pieces, self.split_bytes)
        else:
            manifests = list_manifests(self.landing_uri, self.selection.manifests)
            groups = plan_landing(self.landing_uri, manifests, self.selection, self.split_bytes)
        # Spark needs at least one partition; an empty one reads nothing.
        return [InputPartition(g) for g in groups] or [InputPartition([])]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        pieces: list[SegmentPiece] = partition.value
        batches = (b for piece in pieces for b in read_piece(piece, self.selection, self.verify_crc))
        return coalesce(batches, COALESCE_ROWS)


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
