"""Sites in one landing: the layout before sites keeps working, overlapping objects give each record once."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds
import pytest

from kafkad.spark_bridge.arrow_decode import decode_segment
from kafkad.spark_bridge.ingest import read_ledger, run_ingest
from kafkad.spark_bridge.ledger import LEDGER_FILE
from kafkad.spark_bridge.manifest import build_manifest
from kafkad.spark_bridge.position import LEGACY_CHECKPOINT_FILE, POSITIONS_FILE, LocalPositionStore
from tests.spark.helpers import counts, expected_rows, make_shipper, parquet_rows, write_logs

pytestmark = pytest.mark.spark


def _old_ship_and_ingest(logs: Path, landing: Path, output: Path) -> int:
    """What kafkad before sites left behind after shipping and ingesting each partition's first segment:
    `<topic>/<partition>/<base>.log` + version-1 manifests, its checkpoint, a version-1 ledger and
    Parquet under `topic=/date=`. Returns the records it ingested."""
    ledger: dict[str, Any] = {}
    checkpoint = []
    tables = []
    for pdir in sorted(p for p in logs.iterdir() if p.is_dir()):
        topic, _, part = pdir.name.rpartition("-")
        first = sorted(pdir.glob("*.log"))[0]
        data = first.read_bytes()
        m = build_manifest(topic, int(part), 0, data, site="x", cluster_id=None)
        body = json.loads(m.to_json())
        for k in ("site", "cluster_id"):
            del body[k]
        body["version"] = 1
        target = landing / topic / part
        target.mkdir(parents=True)
        (target / f"{0:020d}.log").write_bytes(data)
        (target / f"{0:020d}.manifest.json").write_text(json.dumps(body))
        ledger[f"{topic}/{part}/0"] = {"crc32c": m.crc32c, "run": "old"}
        checkpoint.append(f"{topic} {part} 0")
        tables += [pa.Table.from_batches([b]) for b in decode_segment(data, topic, int(part))]
    (logs / LEGACY_CHECKPOINT_FILE).write_text(f"0\n{len(checkpoint)}\n" + "\n".join(checkpoint) + "\n")
    output.mkdir()
    (output / LEDGER_FILE).write_text(json.dumps({"version": 1, "segments": ledger}))
    table = pa.concat_tables(tables)
    ds.write_dataset(
        table,
        output,
        format="parquet",
        partitioning=ds.partitioning(table.select(["topic", "date"]).schema, flavor="hive"),
        basename_template="part-old-{i}.parquet",
        existing_data_behavior="overwrite_or_ignore",
    )
    return int(table.num_rows)


def test_landing_and_output_from_before_sites_keep_working(tmp_path: Path, spark: Any) -> None:
    logs, landing, output = tmp_path / "logs", tmp_path / "landing", tmp_path / "out"
    expected = expected_rows(write_logs(logs), site="paris")
    old_records = _old_ship_and_ingest(logs, landing, output)
    assert (output / "topic=orders").is_dir()

    # the upgraded broker converts its checkpoint to offsets and ships only what the old one had not
    results = make_shipper(logs, landing, site="paris", cluster_id="c1").run_once()
    assert [r.segment.base_offset > 0 for r in results] == [True] * 10
    assert not (logs / LEGACY_CHECKPOINT_FILE).exists() and (logs / POSITIONS_FILE).exists()

    summary = run_ingest(spark, str(landing), output, legacy_site="paris")
    assert summary.records == len(expected) - old_records
    assert not list(output.glob("topic=*"))  # moved under site=paris/
    assert parquet_rows(output) == expected  # old rows (now site paris) + new ones, each once
    ledger = read_ledger(output)
    assert len(ledger) == 5 and all(len(r) == 1 and r[0][0] == 0 for r in ledger.values())
    assert run_ingest(spark, str(landing), output, legacy_site="paris").topics == ()


def test_overlapping_objects_of_two_sites_give_each_record_once(tmp_path: Path, spark: Any) -> None:
    """Site a ships everything twice over (a tail from mid-segment and a two-segment object, as two
    leaders with other segment boundaries would); site b has the same topics. One ingest: exactly once."""
    landing, output = tmp_path / "landing", tmp_path / "out"
    landing.mkdir()
    logs_a, logs_b = tmp_path / "a", tmp_path / "b"
    want = expected_rows(write_logs(logs_a), site="a") + expected_rows(write_logs(logs_b), site="b")
    make_shipper(logs_a, landing, site="a", cluster_id="ca").run_once()
    make_shipper(logs_b, landing, site="b", cluster_id="cb").run_once()
    # another "leader" of site a: shipped from offset 100 (mid-segment) on, its own boundaries
    other = tmp_path / "a2"
    other.mkdir()
    shipper = make_shipper(logs_a, landing, site="a", cluster_id="ca")
    shipper._positions = LocalPositionStore.in_dir(other)
    shipper._positions.advance("orders", 1, 100)  # batches 0-59, 60, 61-120, ...
    tails = [r for r in shipper.run_once() if r.copied]
    assert [(r.segment.topic, r.manifest.base_offset if r.manifest else -1) for r in tails] == [
        ("orders", 61)
    ]
    # and one object spanning two segments of site a's clicks-0
    segs = sorted((logs_a / "clicks-0").glob("*.log"))[:2]
    joined = segs[0].read_bytes() + segs[1].read_bytes()
    m = build_manifest("clicks", 0, 0, joined, site="a", cluster_id="ca")
    (landing / m.log_name).write_bytes(joined)
    (landing / m.manifest_name).write_bytes(m.to_json())

    summary = run_ingest(spark, str(landing), output)
    got = parquet_rows(output)
    assert counts(got) == counts(sorted(want))
    assert got == sorted(want)
    assert summary.records == len(want)
    assert {(t.site, t.topic) for t in summary.topics} == {
        (s, t) for s in "ab" for t in ("clicks", "metrics", "orders")
    }
    clusters = {
        r["site"]: r["cluster_id"] for r in ds.dataset(output, partitioning="hive").to_table().to_pylist()
    }
    assert clusters == {"a": "ca", "b": "cb"}
    assert run_ingest(spark, str(landing), output).topics == ()
