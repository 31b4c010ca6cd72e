"""End to end: a real client produces to a real kafkad, the daemon's own shipper lands the rolled segments,
and the Spark ingest turns them into Parquet holding exactly the produced records.

KAFKAD_TEST_BRIDGE_RECORDS (default 1,000,000, the issue's figure) sets the total over the three topics.
"""

from __future__ import annotations

import os
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from kafkad.spark_bridge.ingest import run_ingest
from tests.integration.broker_process import BrokerProcess
from tests.integration.clients import ConfluentClient, Rec
from tests.integration.test_bridge_daemon import covers

pytestmark = [pytest.mark.spark, pytest.mark.integration]

TOTAL = int(os.environ.get("KAFKAD_TEST_BRIDGE_RECORDS", "1000000"))
TOPICS = {"t-lz4": "lz4", "t-zstd": "zstd", "t-gzip": "gzip"}
PARTITIONS = 2


def _records(topic_index: int, n: int, ts0: int) -> list[Rec]:
    out = []
    for i in range(n):
        value = None if i % 101 == 7 else b"v%d-%d" % (topic_index, i)
        headers = (("i", str(i).encode()),) if i % 3 == 0 else ()
        out.append(Rec(i % PARTITIONS, b"k%d" % (i % 5000), value, headers, ts0 + i))
    return out


@pytest.mark.timeout(1200)  # 1M records produced, shipped and ingested: more than 300 s on a loaded machine
def test_produce_to_real_kafkad_ship_and_ingest(tmp_path: Path, spark: Any) -> None:
    landing, output = tmp_path / "landing", tmp_path / "out"
    landing.mkdir()
    broker = BrokerProcess(
        tmp_path / "broker",
        {
            "bridge.enabled": "true",
            "bridge.landing.dir": str(landing),
            "bridge.topics": "t-.*",
            "bridge.max.segment.age.ms": "2000",  # the last, quiet segment rolls and ships too
            "log.segment.bytes": str(4 * 1024 * 1024),
        },
    )
    client = ConfluentClient()
    produced: dict[str, list[Rec]] = {}
    ts0 = int(time.time() * 1000) - 3_600_000
    with broker:
        for i, (topic, codec) in enumerate(TOPICS.items()):
            client.create_topic(broker.bootstrap, topic, PARTITIONS)
            produced[topic] = _records(i, TOTAL // len(TOPICS), ts0)
            client.produce(broker.bootstrap, topic, produced[topic], codec)
        ends = {
            (t, p): sum(1 for r in recs if r.partition == p) for t, recs in produced.items() for p in range(2)
        }
        deadline = time.monotonic() + 600
        while not all(covers(landing, t, p, end) for (t, p), end in ends.items()):
            assert time.monotonic() < deadline, "the daemon did not ship every segment within 600 s"
            assert broker.running, broker.log_text()[-4000:]
            time.sleep(0.5)
    assert not [p for p in landing.rglob("*") if p.is_file() and ".tmp" in p.name], "temp files visible"

    run_ingest(spark, str(landing), output)
    table = pq.read_table(output, partitioning="hive")
    cols = table.to_pydict()
    got: dict[tuple[str, int], list[int]] = defaultdict(list)
    rows = {}
    for i in range(table.num_rows):
        key = (str(cols["topic"][i]), int(cols["partition"][i]))
        got[key].append(int(cols["offset"][i]))
        rows[(*key, int(cols["offset"][i]))] = i
    assert table.num_rows == sum(len(r) for r in produced.values())
    for (topic, part), end in ends.items():
        assert sorted(got[(topic, part)]) == list(range(end)), f"{topic}-{part}: offsets not exactly once"
    for topic, recs in produced.items():
        per_part: dict[int, int] = defaultdict(int)
        for rec in recs:
            offset = per_part[rec.partition]
            per_part[rec.partition] += 1
            i = rows[(topic, rec.partition, offset)]
            hdrs = tuple((h["key"], h["value"]) for h in cols["headers"][i])
            assert (cols["key"][i], cols["value"][i], hdrs) == (rec.key, rec.value, rec.headers)
            assert int(cols["timestamp"][i].timestamp() * 1000) == rec.timestamp
