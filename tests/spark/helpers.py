"""Build landing areas from real segments and compare Parquet output with what was written."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from kafkad.clock import ManualClock
from kafkad.spark_bridge.landing import FilesystemLanding
from kafkad.spark_bridge.position import LocalPositionStore
from kafkad.spark_bridge.segment_source import DirectorySegmentSource
from kafkad.spark_bridge.shipper import Shipper, ShipperConfig
from kafkad.storage.records import Compression
from tests.unit.spark_bridge.factory import Expected, write_partition

Row = tuple[str, str, int, int, int, bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...]]
SITE = "paris"
TOPICS = {"orders": 2, "clicks": 1, "metrics": 2}  # topic -> partitions


def write_logs(log_dir: Path) -> list[Expected]:
    """3 topics, mixed codecs (all five), control batches, LogAppendTime batches, headers, nulls."""
    expected: list[Expected] = []
    for i, (topic, parts) in enumerate(sorted(TOPICS.items())):
        for p in range(parts):
            expected += write_partition(
                log_dir,
                topic,
                p,
                segments=3,
                batches_per_segment=6,
                records_per_batch=40 + 10 * i,
                codecs=tuple(Compression)[i:] + tuple(Compression)[:i],
                ts_step_ms=600_000,
            )
    return expected


def make_shipper(log_dir: Path, landing: Path, site: str = SITE, cluster_id: str | None = None) -> Shipper:
    return Shipper(
        ShipperConfig(site=site, cluster_id=cluster_id),
        DirectorySegmentSource([log_dir]),
        FilesystemLanding(landing),
        LocalPositionStore.in_dir(log_dir),
        clock=ManualClock(),
    )


def expected_rows(expected: list[Expected], site: str = SITE) -> list[Row]:
    return sorted(
        (site, e.topic, e.partition, e.offset, e.timestamp, e.key, e.value, e.headers) for e in expected
    )


def parquet_rows(output: Path) -> list[Row]:
    table = pq.read_table(output, partitioning="hive")
    d: dict[str, list[Any]] = table.to_pydict()
    rows: list[Row] = []
    for i in range(table.num_rows):
        ts = d["timestamp"][i]
        rows.append(
            (
                str(d["site"][i]),
                str(d["topic"][i]),
                d["partition"][i],
                d["offset"][i],
                int(ts.timestamp() * 1000),
                d["key"][i],
                d["value"][i],
                tuple((h["key"], h["value"]) for h in d["headers"][i]),
            )
        )
    return sorted(rows)


def counts(rows: list[Row]) -> Counter[tuple[str, str, int]]:
    return Counter((r[0], r[1], r[2]) for r in rows)
