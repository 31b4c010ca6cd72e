"""End to end: a real client produces to a real kafkad; its rolled segments are shipped and ingested.

The daemon does not run the shipper itself yet, so the shipper reads the broker's log dir from outside
(DirectorySegmentSource: closed segments never change), which is what the daemon-side wiring would
hand it through LogManagerSegmentSource.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kafkad.spark_bridge.ingest import run_ingest
from kafkad.spark_bridge.landing import FilesystemLanding
from kafkad.spark_bridge.segment_source import DirectorySegmentSource
from kafkad.spark_bridge.shipper import CHECKPOINT_FILE, Shipper, ShipperConfig
from tests.integration.broker_process import BrokerProcess
from tests.integration.clients import ConfluentClient, make_records
from tests.spark.helpers import parquet_rows

pytestmark = [pytest.mark.spark, pytest.mark.integration]
TS0 = 1_700_000_000_000


def test_produce_to_real_kafkad_ship_and_ingest(tmp_path: Path, spark: Any) -> None:
    broker = BrokerProcess(tmp_path / "broker", {"log.segment.bytes": "32768"})
    broker.start()
    client = ConfluentClient()
    produced: dict[str, list[Any]] = {}
    try:
        for topic, codec in (("t-lz4", "lz4"), ("t-zstd", "zstd"), ("t-gzip", "gzip")):
            client.create_topic(broker.bootstrap, topic, 1)
            recs = make_records(3000, 1, TS0)
            for i in range(0, len(recs), 200):  # small flushes keep each batch well under a segment
                client.produce(broker.bootstrap, topic, recs[i : i + 200], codec)
            produced[topic] = recs
    finally:
        broker.stop()

    landing, output = tmp_path / "landing", tmp_path / "out"
    landing.mkdir()
    source = DirectorySegmentSource([broker.data_dir])
    shipper = Shipper(
        ShipperConfig(topics=("t-.*",)), source, FilesystemLanding(landing), tmp_path / CHECKPOINT_FILE
    )
    results = shipper.run_once()
    assert {r.segment.topic for r in results} == set(produced)  # 32 KiB segments: rolled in each topic

    run_ingest(spark, str(landing), output)
    rows = parquet_rows(output)
    active = {a.topic: a.base_offset for a in source.active_segments()}
    for topic, recs in produced.items():
        got = [r for r in rows if r[0] == topic]
        assert len(got) == active[topic] > 0  # exactly the records of the closed segments
        for row, rec in zip(got, recs, strict=False):
            assert (row[3], row[4], row[5], row[6]) == (rec.timestamp, rec.key, rec.value, tuple(rec.headers))
