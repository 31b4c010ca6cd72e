"""The Spark bridge inside a real kafkad: closed segments land byte-identical with correct manifests,
retention keeps what is not shipped yet, and a restart ships nothing twice.

Timeline of the one test (each wait is a bounded poll on something observable):
1. start kafkad with bridge.enabled and a landing dir that does not exist yet (an unmounted share):
   the shipper backs off; produce to `ship` (kept 7 days), `held` and `skip` (both retention.ms=1 s,
   records an hour old; `skip` is not in bridge.topics);
2. retention deletes `skip`'s segments but keeps every segment of `held` (metric + files on disk);
3. create the landing dir: everything lands; `held` is deleted only after it landed (its manifests
   cover offsets 0..end without a gap); landed `.log` files equal the broker's segments byte for byte;
4. SIGTERM + restart, produce a little more: only the new segment is shipped.
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path

import pytest
from crc32c import crc32c

from kafkad.storage.meta_properties import parse_properties
from tests.integration.broker_process import BrokerProcess, free_port
from tests.integration.clients import Rec, create_topics, produce_confluent

pytestmark = pytest.mark.integration

SEGMENT_BYTES = 262_144
SHIP_RECORDS = 20_000
HELD_RECORDS = 6_000
HOUR_MS = 3_600_000


def wait_for(what: str, cond: Callable[[], bool], broker: BrokerProcess, timeout_s: float = 180.0) -> None:
    """Poll `cond` until true; generous: retention, shipping and rolls run on timers of a loaded broker."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if cond():
            return
        assert broker.running, f"kafkad died while waiting for {what}:\n{broker.log_text()[-4000:]}"
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}; log tail:\n{broker.log_text()[-4000:]}")


def produce(bootstrap: str, topic: str, partitions: int, n: int, ts_base: int | None = None) -> None:
    """`n` records round-robin over the partitions; timestamps from `ts_base` (None: the producer's now)."""

    def recs() -> Iterator[Rec]:
        for i in range(n):
            value = f"{topic}-{i:07d}-".encode() + b"x" * (40 + i % 60)
            ts = None if ts_base is None else ts_base + i // 10
            yield Rec(i % partitions, f"k{i % 100}".encode(), value, (), ts)

    # batch.size well under the segment size, so segments hold many batches and roll on size.
    produce_confluent(bootstrap, topic, recs(), {"linger.ms": 2, "batch.size": 32_768, "acks": "all"})


def segment_logs(part_dir: Path) -> list[Path]:
    """Live segment files (not `.deleted`), oldest first; the last one is the active segment."""
    return sorted(p for p in part_dir.iterdir() if p.name.endswith(".log"))


def manifests(landing: Path, topic: str, partition: int, site: str = "*") -> list[dict[str, int | str]]:
    """The partition's manifests (of every site, unless `site`), by first offset."""
    found = landing.glob(f"site={site}/{topic}/{partition}/*.manifest.json")
    return sorted((json.loads(p.read_bytes()) for p in found), key=lambda m: int(m["base_offset"]))


def read_cluster_id(data_dir: Path) -> str:
    return parse_properties((data_dir / "meta.properties").read_text())["cluster.id"]


def landed_log(landing: Path, m: dict[str, int | str]) -> Path:
    """The .log a manifest describes."""
    first, last = int(m["base_offset"]), int(m["last_offset"])
    return (
        landing
        / f"site={m['site']}"
        / str(m["topic"])
        / str(m["partition"])
        / f"{first:020d}-{last:020d}.log"
    )


def covers(landing: Path, topic: str, partition: int, end_offset: int, site: str = "*") -> bool:
    """The partition's manifests chain from offset 0 without a gap up to end_offset - 1."""
    ms = manifests(landing, topic, partition, site)
    expect = 0
    for m in ms:
        if m["base_offset"] != expect:
            return False
        expect = int(m["last_offset"]) + 1
    return expect == end_offset


def metric(port: int, name: str) -> float | None:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=60) as r:
        text = r.read().decode()
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


def test_bridge_ships_segments_keeps_unshipped_and_never_reships(tmp_path: Path) -> None:
    landing = tmp_path / "landing"  # created later: until then the landing is "unreachable"
    metrics_port = free_port()
    broker = BrokerProcess(
        tmp_path / "kafkad",
        {
            "bridge.enabled": "true",
            "bridge.landing.dir": str(landing),
            "bridge.topics": "ship,hel.",  # regexes matching whole names: `hel.` is `held`, not `helds`
            "bridge.max.segment.age.ms": "1000",
            "log.segment.bytes": str(SEGMENT_BYTES),
            "log.retention.check.interval.ms": "300",
            "metrics.listeners": f"http://127.0.0.1:{metrics_port}",
        },
    )
    with broker:
        started = broker.log_text()
        assert "bridge: shipping closed segments of topics matching ship | hel." in started
        assert str(landing) in started
        data = broker.data_dir
        expiring = {"retention.ms": "1000"}
        create_topics(
            broker.bootstrap, {"ship": 2, "held": 1, "skip": 1}, {"held": expiring, "skip": expiring}
        )
        old = int(time.time() * 1000) - HOUR_MS
        produce(broker.bootstrap, "ship", 2, SHIP_RECORDS)
        produce(broker.bootstrap, "held", 1, HELD_RECORDS, old)
        produce(broker.bootstrap, "skip", 1, HELD_RECORDS, old)
        held_dir, skip_dir = data / "held-0", data / "skip-0"

        # 2. `skip` (not shipped) loses its expired segments; `held` keeps all of them, unshipped.
        wait_for("retention of skip", lambda: len(segment_logs(skip_dir)) == 1, broker)
        wait_for(
            "retention holding held's segments",
            lambda: (
                (metric(metrics_port, "kafkad_bridge_retention_held_segments") or 0)
                >= len(segment_logs(held_dir)) - 1
            ),
            broker,
        )
        held_segments = segment_logs(held_dir)
        assert len(held_segments) >= 3, "expected held to span several segments"
        assert held_segments[0].name == f"{0:020d}.log"
        assert not landing.exists()
        # The shipper's first attempt may come after retention's pass on a loaded machine: wait for it.
        wait_for(
            "the shipper to report the landing unreachable",
            lambda: "unreachable" in broker.log_text(),
            broker,
        )

        # 3. The share appears: everything lands; held is deleted only once shipped.
        landing.mkdir()
        for p in (0, 1):
            wait_for(f"ship-{p} landed", partial(covers, landing, "ship", p, SHIP_RECORDS // 2), broker)
        wait_for("held landed", lambda: covers(landing, "held", 0, HELD_RECORDS), broker)
        wait_for("held deleted after shipping", lambda: len(segment_logs(held_dir)) == 1, broker)
        assert manifests(landing, "skip", 0) == []
        assert metric(metrics_port, "kafkad_bridge_unshipped_segments_deleted_total") == 0

        cluster_id = read_cluster_id(data)
        assert [p.name for p in landing.iterdir()] == [f"site={cluster_id}"]  # bridge.site unset
        for p in (0, 1):
            ms = manifests(landing, "ship", p)
            assert len(ms) >= 3
            assert sum(int(m["record_count"]) for m in ms) == SHIP_RECORDS // 2
            for m in ms:
                assert (m["topic"], m["partition"], m["site"], m["cluster_id"]) == (
                    "ship",
                    p,
                    cluster_id,
                    cluster_id,
                )
                name = f"{int(m['base_offset']):020d}.log"
                landed = landed_log(landing, m).read_bytes()
                assert landed == (data / f"ship-{p}" / name).read_bytes(), f"ship-{p}/{name} differs"
                assert m["size"] == len(landed) <= SEGMENT_BYTES
                assert m["crc32c"] == crc32c(landed)
        assert sum(int(m["record_count"]) for m in manifests(landing, "held", 0)) == HELD_RECORDS
        hidden = [p for p in landing.rglob("*") if p.name.startswith(".") or p.name.endswith(".tmp")]
        assert hidden == []
        # The shipper counts a segment just after its manifest lands: wait for the count to catch up.
        landed_logs = sorted(landing.rglob("*.log"))
        wait_for(
            "the shipped-segments metric to count every landed segment",
            lambda: metric(metrics_port, "kafkad_bridge_segments_shipped_total") == len(landed_logs),
            broker,
        )
        before = {p: p.stat().st_mtime_ns for p in landing.rglob("*") if p.is_file()}

        # 4. Restart: nothing is shipped again; only new data lands.
        broker.stop()
        broker.start()
        produce(broker.bootstrap, "ship", 2, 200)
        for p in (0, 1):
            end = SHIP_RECORDS // 2 + 100
            wait_for(f"new ship-{p} data landed", partial(covers, landing, "ship", p, end), broker)
        after = {p: p.stat().st_mtime_ns for p in landing.rglob("*") if p.is_file()}
        assert {p: after[p] for p in before} == before, "a landed object was rewritten after restart"
        new = sorted(set(after) - set(before))
        assert [p.parent.parent.name for p in new] == ["ship"] * len(new)
        # Only segments past the old end landed: usually one per partition, but the 1 s age roll may cut
        # the 100 new records of a partition into two segments on a slow machine; either way, none of
        # them starts below what was already shipped, and each landed .log has its manifest.
        new_logs = [p for p in new if p.name.endswith(".log")]
        assert len(new) == 2 * len(new_logs) and len(new_logs) >= 2
        assert all(int(p.name[:20]) >= SHIP_RECORDS // 2 for p in new_logs), new_logs
        # The log line and the shipped position (an offset: the next one to ship) follow each manifest.
        wait_for(
            "a 'shipped' log line per new segment",
            lambda: broker.log_text().count("bridge: shipped ") == len(new_logs),
            broker,
        )
        want = {f"ship {p} {SHIP_RECORDS // 2 + 100}" for p in (0, 1)}
        wait_for(
            "the shipped positions to reach the new segments' end",
            lambda: want <= set((data / "bridge-shipped-offsets").read_text().split("\n")),
            broker,
        )
        assert broker.log_text().count("bridge: shipped ") == len(new_logs)  # and nothing more
