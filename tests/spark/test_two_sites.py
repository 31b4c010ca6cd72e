"""Two real standalone kafkad brokers (two clusters, two sites) with the same topic ship into one landing;
one ingest gives every record of both exactly once, each with its site and cluster id, even with
overlapping objects in the landing; a re-run ingests nothing."""

from __future__ import annotations

import time
from collections import defaultdict
from functools import partial
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
import pytest

from kafkad.spark_bridge.ingest import run_ingest
from kafkad.spark_bridge.manifest import build_manifest
from tests.integration.broker_process import BrokerProcess
from tests.integration.clients import Rec, create_topics, produce_confluent
from tests.integration.test_bridge_daemon import covers, landed_log, manifests, read_cluster_id, wait_for

pytestmark = [pytest.mark.spark, pytest.mark.integration]

RECORDS = 4_000  # per broker, over 2 partitions
PARTITIONS = 2


def _broker(base: Path, landing: Path, site: str | None) -> BrokerProcess:
    cfg = {
        "bridge.enabled": "true",
        "bridge.landing.dir": str(landing),
        "bridge.topics": "sensors",
        "bridge.max.segment.age.ms": "1000",
        "log.segment.bytes": str(64 * 1024),
    }
    if site is not None:
        cfg["bridge.site"] = site
    return BrokerProcess(base, cfg)


def _records(name: str, ts0: int) -> list[Rec]:
    return [
        Rec(i % PARTITIONS, f"k{i}".encode(), f"{name}-{i:06d}-".encode() + b"x" * 50, (), ts0 + i)
        for i in range(RECORDS)
    ]


def _add_overlapping_object(landing: Path, site: str) -> None:
    """What a second leader with other segment boundaries ships: one object over two landed ones."""
    ms = manifests(landing, "sensors", 0, site)
    assert len(ms) >= 3
    a, b = ms[1], ms[2]
    joined = landed_log(landing, a).read_bytes() + landed_log(landing, b).read_bytes()
    m = build_manifest(
        "sensors", 0, int(a["base_offset"]), joined, site=site, cluster_id=str(a["cluster_id"])
    )
    (landing / m.log_name).write_bytes(joined)
    (landing / m.manifest_name).write_bytes(m.to_json())


@pytest.mark.timeout(900)
def test_two_clusters_same_topic_one_landing_each_record_once(tmp_path: Path, spark: Any) -> None:
    landing, output = tmp_path / "landing", tmp_path / "out"
    landing.mkdir()
    lyon = _broker(tmp_path / "lyon", landing, "lyon")
    other = _broker(tmp_path / "other", landing, None)  # site = its cluster id
    ts0 = int(time.time() * 1000) - 3_600_000
    produced: dict[str, list[Rec]] = {}
    with lyon, other:
        sites = {"lyon": lyon, read_cluster_id(other.data_dir): other}
        assert read_cluster_id(lyon.data_dir) != read_cluster_id(other.data_dir)
        for site, broker in sites.items():
            create_topics(broker.bootstrap, {"sensors": PARTITIONS})
            produced[site] = _records(site, ts0)
            produce_confluent(
                broker.bootstrap,
                "sensors",
                produced[site],
                {"linger.ms": 5, "batch.size": 8192, "acks": "all"},
            )
        for site, broker in sites.items():
            for p in range(PARTITIONS):
                wait_for(
                    f"{site} sensors-{p} landed",
                    partial(covers, landing, "sensors", p, RECORDS // PARTITIONS, site),
                    broker,
                    timeout_s=300,
                )
        clusters = {site: read_cluster_id(b.data_dir) for site, b in sites.items()}
    assert sorted(p.name for p in landing.iterdir()) == sorted(f"site={s}" for s in sites)
    for site in sites:
        _add_overlapping_object(landing, site)

    summary = run_ingest(spark, str(landing), output)
    assert summary.records == 2 * RECORDS
    assert {(t.site, t.topic, t.records, t.lag_offsets) for t in summary.topics} == {
        (s, "sensors", RECORDS, 0) for s in sites
    }
    half = RECORDS // PARTITIONS
    assert all(dict(t.ranges) == {p: ((0, half - 1),) for p in range(PARTITIONS)} for t in summary.topics)
    rows = ds.dataset(output, partitioning="hive").to_table().to_pylist()
    got: dict[tuple[str, int], list[int]] = defaultdict(list)
    for r in rows:
        got[(r["site"], r["partition"])].append(r["offset"])
        assert r["cluster_id"] == clusters[r["site"]]
        assert r["value"].startswith(f"{r['site']}-".encode())
    for site in sites:
        for p in range(PARTITIONS):
            assert sorted(got[(site, p)]) == list(range(half)), f"{site} sensors-{p}: not exactly once"
    values = {(r["site"], r["value"]) for r in rows}
    assert values == {(s, rec.value) for s, recs in produced.items() for rec in recs}
    # a query for one site, topic and day reads only its files
    day_dirs = list(output.glob("site=lyon/topic=sensors/date=*"))
    assert day_dirs and all(f.suffix == ".parquet" for d in day_dirs for f in d.iterdir())

    again = run_ingest(spark, str(landing), output)
    assert again.topics == () and again.manifests_read == 0
    assert ds.dataset(output, partitioning="hive").count_rows() == 2 * RECORDS
