from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kafkad.spark_bridge.ingest import STAGING_DIR, read_ledger, run_ingest
from kafkad.spark_bridge.report import SUMMARY_FILE
from tests.spark.helpers import SITE, counts, expected_rows, make_shipper, parquet_rows, write_logs

pytestmark = pytest.mark.spark


def test_ship_ingest_exact_then_nothing_new(tmp_path: Path, spark: Any) -> None:
    logs, landing, output = tmp_path / "logs", tmp_path / "landing", tmp_path / "out"
    landing.mkdir()
    expected = expected_rows(write_logs(logs))
    shipped = make_shipper(logs, landing).run_once()
    assert len(shipped) == 5 * 3

    summary = run_ingest(spark, str(landing), output)
    got = parquet_rows(output)
    assert counts(got) == counts(expected)
    assert got == expected  # keys, values, headers, timestamps; no duplicates
    assert {t.topic: t.records for t in summary.topics} == {
        t: sum(1 for r in expected if r[1] == t) for t in ("clicks", "metrics", "orders")
    }
    assert {t.site for t in summary.topics} == {SITE}
    assert "TOTAL" in summary.table()
    # partitioned by site, topic and date
    assert [p.name for p in output.iterdir() if p.is_dir() and not p.name.startswith("_")] == [f"site={SITE}"]
    assert sorted(p.name for p in (output / f"site={SITE}").iterdir()) == [
        "topic=clicks",
        "topic=metrics",
        "topic=orders",
    ]
    assert len(list((output / f"site={SITE}" / "topic=orders").glob("date=*"))) > 1
    ledger = read_ledger(output)
    assert len(ledger) == 5 and all(len(r) == 1 and r[0][0] == 0 for r in ledger.values())
    assert not (output / STAGING_DIR).exists() or not any((output / STAGING_DIR).iterdir())
    report = json.loads((output / SUMMARY_FILE).read_text())
    assert report["totals"]["records"] == len(expected) and report["totals"]["lag_offsets"] == 0

    again = run_ingest(spark, str(landing), output)
    assert again.topics == () and parquet_rows(output) == expected
    assert again.manifests_read == 0  # names the ledger covers are not even read


def test_datasource_options_prune(tmp_path: Path, spark: Any) -> None:
    logs, landing = tmp_path / "logs", tmp_path / "landing"
    landing.mkdir()
    expected = expected_rows(write_logs(logs))
    make_shipper(logs, landing).run_once()
    from kafkad.spark_bridge.datasource import register

    register(spark)
    df = (
        spark.read.format("kafkad")
        .option("topics", "orders")
        .option("partitions", "1")
        .option("startingOffset", "100")
        .option("endingOffset", "200")
        .load(str(landing))
    )
    # offsets 100..199 of orders-1 all live in its first segment: one input partition
    assert df.rdd.getNumPartitions() == 1
    offsets = sorted(r.offset for r in df.select("offset").collect())
    want = sorted(r[3] for r in expected if r[1] == "orders" and r[2] == 1 and 100 <= r[3] < 200)
    assert offsets == want and len(want) > 50


def test_new_segments_only_on_later_runs(tmp_path: Path, spark: Any) -> None:
    logs, landing, output = tmp_path / "logs", tmp_path / "landing", tmp_path / "out"
    landing.mkdir()
    expected = expected_rows(write_logs(logs))
    shipper = make_shipper(logs, landing)
    pending = shipper.pending()
    for seg in pending[:6]:
        shipper.ship(seg)
    first = run_ingest(spark, str(landing), output)
    assert sum(t.objects for t in first.topics) == 6
    shipper.run_once()
    second = run_ingest(spark, str(landing), output)
    assert sum(t.objects for t in second.topics) == 9
    assert parquet_rows(output) == expected
