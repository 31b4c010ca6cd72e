"""What the cluster benchmarks share: a ZooKeeper + 3-kafkad cluster (tests/cluster harness), a wire probe
that times when partitions become writable, and helpers to put leadership back where a run expects it.

How it works: `cluster_env` starts Debian's ZooKeeper and a KafkadCluster under the bench work dir and stops
both afterwards. `probe_writable` is a raw Kafka-wire client (kafkad.replication.BrokerChannel): every 10 ms it
asks a live broker for Metadata (what clients see) and sends one acks=all Produce of one record to each
partition still pending, to the leader that Metadata names; the first acknowledgement of a partition is its
"writable again" time (the moment a producer sees its acks again). `zk_gone_watch` arms a ZooKeeper watch on /brokers/ids/<id>, so the moment ZooKeeper
expires a killed broker's session is measured in the same run (the floor of any kill -9 failover).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from kafkad.protocol import ApiKey
from kafkad.replication.broker_channel import BrokerChannel
from tests.bench.raw_client import make_batch
from tests.cluster.cluster import KafkadCluster
from tests.cluster.test_election import request
from tests.cluster.zookeeper import ZooKeeperServer, four_letter

SESSION_TIMEOUT_MS = 6000  # the harness's zookeeper.session.timeout.ms (Kafka's default: 18000)


@contextlib.contextmanager
def cluster_env(
    work: Path,
    overrides: Mapping[str, str] | None = None,
    *,
    broker_overrides: Mapping[int, Mapping[str, str]] | None = None,
) -> Iterator[KafkadCluster]:
    zk = ZooKeeperServer(work / "zk")
    zk.start()
    c = KafkadCluster(
        work / "cluster",
        zk.connect_string,
        3,
        overrides={"zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS), **(overrides or {})},
        broker_overrides=broker_overrides,
        startup_timeout_s=120,
    )
    try:
        c.start()
        c.wait_registered([1, 2, 3], timeout_s=60)
        c.wait_controller(timeout_s=60)
        yield c
    finally:
        c.stop()
        zk.stop()


def create_topic(
    c: KafkadCluster,
    name: str,
    assignment: Sequence[Sequence[int]],
    configs: Mapping[str, str] | None = None,
) -> None:
    """CreateTopics with an explicit replica assignment (partition i -> assignment[i], first = preferred)
    and topic configs."""
    body = {
        "topics": [
            {
                "name": name,
                "num_partitions": -1,
                "replication_factor": -1,
                "assignments": [
                    {"partition_index": i, "broker_ids": list(rs)} for i, rs in enumerate(assignment)
                ],
                "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()],
            }
        ],
        "timeout_ms": 120000,
        "validate_only": False,
    }
    got = request(c.bootstrap.split(",")[0], ApiKey.CREATE_TOPICS, 4, body)["topics"][0]
    assert got["error_code"] == 0, got


def delete_topics(c: KafkadCluster, names: Sequence[str], timeout_s: float = 120) -> None:
    """DeleteTopics, then wait until no broker holds a dir of them (renamed `*-delete` dirs included):
    a bench that writes GBs per row frees the disk before the next. Needs a short file.delete.delay.ms."""
    body = {"topic_names": list(names), "timeout_ms": 120000}
    for r in request(c.bootstrap.split(",")[0], ApiKey.DELETE_TOPICS, 4, body)["responses"]:
        assert r["error_code"] == 0, r
    prefixes = tuple(f"{n}-" for n in names)

    def gone() -> bool:
        return not any(
            d.name.startswith(prefixes) for b in c.ids for d in c.broker(b).data_dir.iterdir() if d.is_dir()
        )

    c.wait_until(gone, timeout_s, f"topics {list(names)} deleted from every broker's disk")


def trim_logs(c: KafkadCluster, leader: int, names: Sequence[str], timeout_s: float = 60) -> None:
    """DeleteRecords of partition 0 of each topic up to its high watermark (sent to `leader`), then wait until
    no broker holds more than two segment files of them: a bench that writes GBs per row keeps the page cache
    it grows bounded (tests/bench/page_cache_probe.py says why that matters on this machine) while the
    topics and their byte counts stay. Needs a short log.segment.delete.delay.ms."""
    body = {
        "topics": [{"name": n, "partitions": [{"partition_index": 0, "offset": -1}]} for n in names],
        "timeout_ms": 30000,
    }
    for t in request(f"127.0.0.1:{c.broker(leader).port}", ApiKey.DELETE_RECORDS, 2, body)["topics"]:
        assert all(p["error_code"] == 0 for p in t["partitions"]), t

    def trimmed() -> bool:
        return all(
            len(list((c.broker(b).data_dir / f"{n}-0").glob("*.log"))) <= 2 for b in c.ids for n in names
        )

    c.wait_until(trimmed, timeout_s, f"logs of {list(names)} trimmed on every broker")


def states(c: KafkadCluster, topic: str, n: int) -> list[tuple[int, tuple[int, ...]] | None]:
    """(leader, isr) of partitions 0..n-1, read from ZooKeeper with n pipelined gets."""
    import json

    asyncs = [c.zk.client.get_async(f"/brokers/topics/{topic}/partitions/{p}/state") for p in range(n)]
    out: list[tuple[int, tuple[int, ...]] | None] = []
    for a in asyncs:
        try:
            data, _ = a.get(timeout=30)
        except Exception:
            out.append(None)
            continue
        d = json.loads(data.decode())
        out.append((int(d["leader"]), tuple(int(x) for x in d["isr"])))
    return out


def wait_led_by(c: KafkadCluster, topic: str, n: int, leader: int, isr_size: int, timeout_s: float) -> None:
    def ok() -> bool:
        return all(s is not None and s[0] == leader and len(s[1]) >= isr_size for s in states(c, topic, n))

    c.wait_until(ok, timeout_s, f"{topic}: {n} partitions led by {leader} with ISR >= {isr_size}")


def elect_preferred(c: KafkadCluster, topic: str, n: int) -> None:
    """Preferred leader election of every partition over the wire (ElectLeaders through librdkafka)."""
    from confluent_kafka import ElectionType, TopicPartition
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(topic, p) for p in range(n)]).result(120)


def zk_packets_received(c: KafkadCluster) -> int:
    """ZooKeeper's zk_packets_received (mntr): requests from every client since it started."""
    host, port = c.zk_connect.split(",")[0].rsplit(":", 1)
    for line in four_letter(host, int(port), "mntr").splitlines():
        key, _, value = line.partition("\t")
        if key == "zk_packets_received":
            return int(value)
    raise AssertionError("ZooKeeper's mntr has no zk_packets_received")


class ZkGoneWatch:
    """The monotonic time ZooKeeper deletes /brokers/ids/<id> (session expiry or a clean deregistration)."""

    def __init__(self, c: KafkadCluster, broker_id: int) -> None:
        self.at = 0.0
        self._event = threading.Event()
        assert c.zk.client.exists(f"/brokers/ids/{broker_id}", watch=self._fired) is not None

    def _fired(self, _event: Any) -> None:
        self.at = time.monotonic()
        self._event.set()

    def wait(self, timeout_s: float) -> float:
        assert self._event.wait(timeout_s), "the broker's registration did not go away"
        return self.at


def probe_writable(
    c: KafkadCluster, dead: int, topic: str, partitions: Sequence[int], t0: float, timeout_s: float = 120.0
) -> dict[int, float]:
    """Seconds from t0 until each partition accepted a Produce at the leader Metadata names (not `dead`)."""
    addrs = {b: ("127.0.0.1", c.broker(b).port) for b in c.ids if b != dead}
    return asyncio.run(_probe(addrs, topic, partitions, t0, timeout_s))


async def _probe(
    addrs: Mapping[int, tuple[str, int]], topic: str, partitions: Sequence[int], t0: float, timeout_s: float
) -> dict[int, float]:
    chans = {
        b: BrokerChannel(h, p, client_id="bench-probe", request_timeout_ms=2000)
        for b, (h, p) in addrs.items()
    }
    batch = make_batch(10, 1)
    pending, done = set(partitions), {}
    try:
        while pending:
            assert time.monotonic() - t0 < timeout_s, (
                f"{len(pending)} partitions not writable in {timeout_s}s"
            )
            leaders: dict[int, int] = {}
            for ch in chans.values():
                try:
                    md = await ch.request(ApiKey.METADATA, 8, {"topics": [{"name": topic}]})
                except (TimeoutError, ConnectionError):
                    continue
                leaders = {p["partition_index"]: p["leader_id"] for p in md["topics"][0]["partitions"]}
                break
            by_leader: dict[int, list[int]] = defaultdict(list)
            for p in pending:
                if leaders.get(p, -1) in chans:
                    by_leader[leaders[p]].append(p)
            got = await asyncio.gather(
                *(_produce(chans[b], topic, ps, batch) for b, ps in by_leader.items()), return_exceptions=True
            )
            now = time.monotonic()
            for r in got:
                if isinstance(r, BaseException):
                    continue
                for p in r:
                    done[p] = now - t0
                    pending.discard(p)
            if pending:
                await asyncio.sleep(0.01)
    finally:
        for ch in chans.values():
            ch.close()
    return done


async def _produce(ch: BrokerChannel, topic: str, partitions: list[int], batch: bytes) -> list[int]:
    body = {
        "transactional_id": None,
        "acks": -1,  # what an appliance's producers use: writable means the new ISR acknowledges
        "timeout_ms": 1500,  # answered (REQUEST_TIMED_OUT) before the channel's 2 s request timeout
        "topic_data": [
            {"name": topic, "partition_data": [{"index": p, "records": batch} for p in partitions]}
        ],
    }
    resp = await ch.request(ApiKey.PRODUCE, 8, body)
    return [p["index"] for t in resp["responses"] for p in t["partition_responses"] if p["error_code"] == 0]
