"""The Spark bridge on a 3-broker cluster (real ZooKeeper, controller, replication, local Spark).

Only the leader ships; the shipped position is an offset in ZooKeeper. The leader is killed (-9) in the
middle of a segment's copy (the copy is slowed by the rate limit; a hidden temp file in the landing shows
it is under way): the new leader continues from the stored offset with its own segment boundaries, and
after two ingests (one right after the kill, one once everything landed) every acknowledged record is in
Parquet exactly once. A third ingest finds nothing new.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
import pytest

from kafkad.spark_bridge.ingest import run_ingest
from kafkad.spark_bridge.plan import merge
from kafkad.spark_bridge.zk_position import position_path
from tests.cluster.cluster import KafkadCluster
from tests.cluster.test_election import create_topic
from tests.cluster.test_replication import OVERRIDES, _end_offset, acks_all_producer
from tests.cluster.zookeeper import ZooKeeperServer
from tests.spark.conftest import spark  # noqa: F401  (the session fixture)

pytestmark = [pytest.mark.system, pytest.mark.spark, pytest.mark.timeout(900)]

TOPIC = "acked"  # the name test_replication's _end_offset reads
BATCH = 1500


def _landed_ranges(landing: Path) -> list[tuple[int, int]]:
    ms = [json.loads(p.read_bytes()) for p in landing.glob(f"site=*/{TOPIC}/0/*.manifest.json")]
    return merge((int(m["base_offset"]), int(m["last_offset"])) for m in ms if int(m["last_offset"]) >= 0)


def _produce(c: KafkadCluster, start: int, n: int, acked: list[bytes]) -> None:
    errors: list[str] = []
    producer, delivered = acks_all_producer(c.bootstrap, acked, errors, **{"batch.size": 16384})
    for i in range(start, start + n):
        producer.produce(TOPIC, value=b"v%08d-" % i + b"x" * 150, partition=0, on_delivery=delivered)
        producer.poll(0)
    assert producer.flush(90) == 0
    assert not errors, errors[:5]


def test_leader_killed_mid_copy_new_leader_continues_every_acked_record_once(
    tmp_path: Path,
    zk_server: ZooKeeperServer,
    kafkad_cluster: Callable[..., KafkadCluster],
    spark: Any,  # noqa: F811
) -> None:
    landing, output = tmp_path / "landing", tmp_path / "out"
    landing.mkdir()
    c = kafkad_cluster(
        zk_server.connect_string,
        3,
        overrides={
            **OVERRIDES,
            "bridge.enabled": "true",
            "bridge.landing.dir": str(landing),
            "bridge.topics": TOPIC,
            "bridge.max.segment.age.ms": "1500",
            "bridge.rate.limit.bytes.per.sec": str(96 * 1024),  # a segment's copy takes about a second
            "log.segment.bytes": str(96 * 1024),
        },
    )
    c.wait_registered([1, 2, 3], timeout_s=30)
    c.wait_controller(timeout_s=30)
    assert create_topic(c.bootstrap.split(",")[0], TOPIC, 1, 3)["error_code"] == 0
    c.wait_until(
        lambda: (s := c.partition_state(TOPIC, 0)) is not None and len(s.isr) == 3 and s, 30, "full ISR"
    )
    acked: list[bytes] = []
    _produce(c, 0, BATCH, acked)
    leader = c.wait_leader(TOPIC, 0, timeout_s=30).leader

    def copying() -> bool:
        return bool(_landed_ranges(landing)) and any(landing.rglob(".*.tmp"))

    c.wait_until(copying, 120, "the leader in the middle of a segment's copy, after one landed")
    c.kill9(leader)
    new = c.wait_leader(TOPIC, 0, timeout_s=60, exclude=[leader])
    assert new.leader != leader
    first = run_ingest(spark, str(landing), output)  # what had landed before the kill (and since)
    assert first.records > 0
    _produce(c, BATCH, BATCH, acked)
    end = _end_offset(c)
    assert end >= len(acked) == 2 * BATCH
    c.wait_until(
        lambda: _landed_ranges(landing) == [(0, end - 1)] or None, 300, f"offsets 0..{end - 1} landed"
    )
    second = run_ingest(spark, str(landing), output)
    assert first.records + second.records == end

    rows = ds.dataset(output, partitioning="hive").to_table(columns=["site", "offset", "value"]).to_pylist()
    offsets = Counter(r["offset"] for r in rows)
    assert sorted(offsets) == list(range(end)) and set(offsets.values()) == {1}, "offsets not exactly once"
    values = Counter(r["value"] for r in rows)
    assert all(values[v] == 1 for v in acked), "an acknowledged record is missing or duplicated"
    cluster = c.zk._json("/cluster/id")
    assert cluster is not None
    assert {r["site"] for r in rows} == {cluster[0]["id"]}  # bridge.site unset: the cluster id
    assert run_ingest(spark, str(landing), output).topics == ()
    # the position is an offset in ZooKeeper, written by the new leader under its epoch
    got = c.zk._json(position_path(TOPIC, 0))
    assert got is not None
    stored, _version = got
    assert stored["next_offset"] == end and stored["broker"] == new.leader
    assert stored["leader_epoch"] == new.leader_epoch
