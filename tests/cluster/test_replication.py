"""ISR replication with a real ZooKeeper, the real controller and three real kafkad processes (issue 11).

RF 3, min.insync.replicas=2, an idempotent confluent-kafka producer with acks=all writing continuously while the
leader goes through a clean bounce (SIGTERM, start at once), a hard bounce (kill -9, start at once), a clean
shutdown and a hard shutdown (down while the new leader acknowledges writes, then started), each twice: every
acknowledged record is read back exactly once, and the three replicas' logs are byte-identical
(kafkad-replica-verification agrees). A confluent-kafka and a kafka-python group keep their committed
offsets through the kill -9 of their coordinator: the new one (FindCoordinator) answers them, and both
groups resume there. With two of three replicas down,
acks=all answers NOT_ENOUGH_REPLICAS while acks=1 still works.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from kafkad.protocol import ApiKey
from tests.cluster.cluster import KafkadCluster
from tests.cluster.test_election import create_topic, fetch_body, request
from tests.cluster.zookeeper import ZooKeeperServer

pytestmark = [pytest.mark.system, pytest.mark.timeout(180)]

TOPIC = "acked"
OVERRIDES = {
    "min.insync.replicas": "2",
    "replica.lag.time.max.ms": "4000",
    "replica.fetch.wait.max.ms": "100",
    "replica.fetch.backoff.ms": "200",
    "unclean.leader.election.enable": "false",
}
# the tests that wait for a killed broker's session to expire, several times over, expire it sooner
FAST_EXPIRY = {**OVERRIDES, "zookeeper.session.timeout.ms": "4000"}


def replica_bytes(c: KafkadCluster, bid: int, topic: str, partition: int) -> bytes:
    """The replica's whole log: its segments' bytes in offset order."""
    d: Path = c.broker(bid).data_dir / f"{topic}-{partition}"
    return b"".join(p.read_bytes() for p in sorted(d.glob("*.log")))


def read_all(bootstrap: str, topic: str, partition: int, end: int) -> list[bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "verify",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        consumer.assign([TopicPartition(topic, partition, 0)])
        out: list[bytes] = []
        deadline = time.monotonic() + 60
        offset = -1
        while offset < end - 1 and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            err = msg.error()
            if err is not None:
                assert err.code() == KafkaError._PARTITION_EOF, err
                continue
            at, value = msg.offset(), msg.value()
            assert at is not None and value is not None
            offset = at
            out.append(value)
        assert offset == end - 1, f"read up to {offset}, expected {end - 1}"
        return out
    finally:
        consumer.close()


def acks_all_producer(
    bootstrap: str, acked: list[bytes], errors: list[str], **extra: object
) -> tuple[Producer, Callable[[object, object], None]]:
    """An idempotent acks=all producer and its delivery callback (values of acked records, errors)."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
            "message.timeout.ms": 60000,
            "retry.backoff.ms": 100,
            **extra,
        }
    )

    def delivered(err: object, msg: object) -> None:
        if err is None:
            acked.append(bytes(msg.value()))  # type: ignore[attr-defined]
        else:
            errors.append(str(err))

    return producer, delivered


# Issue 11's four faults of the leader, each twice: a bounce starts the broker again at once, a shutdown
# keeps it down until the producer has been acknowledged by the new leader for a while, then starts it.
FAULTS = [
    (kind, hard) for _ in range(2) for kind, hard in (("bounce", False), ("bounce", True), ("shutdown", False),
                                                       ("shutdown", True))
]  # fmt: skip


def test_acks_all_survives_leader_bounces_exactly_once_and_replicas_match(
    zk_server: ZooKeeperServer, kafkad_cluster: Callable[..., KafkadCluster]
) -> None:
    c = kafkad_cluster(zk_server.connect_string, 3, overrides=FAST_EXPIRY)
    c.wait_registered([1, 2, 3], timeout_s=30)
    c.wait_controller(timeout_s=30)
    assert create_topic(c.bootstrap.split(",")[0], TOPIC, 1, 3)["error_code"] == 0
    c.wait_isr(TOPIC, 0, timeout_s=30)
    acked: list[bytes] = []
    errors: list[str] = []
    producer, delivered = acks_all_producer(c.bootstrap, acked, errors)
    stop = threading.Event()

    def produce_forever() -> None:
        i = 0
        while not stop.is_set():
            try:
                producer.produce(TOPIC, value=b"v%08d" % i, partition=0, on_delivery=delivered)
            except BufferError:  # the queue is full while no leader answers: wait for delivery reports
                producer.poll(0.1)
                continue
            i += 1
            producer.poll(0)
            if i % 100 == 0:
                time.sleep(0.01)
        producer.flush(60)

    def acks_after(n: int, what: str) -> None:
        c.wait_until(lambda: len(acked) > n + 300 or None, 60, what)

    writer = threading.Thread(target=produce_forever, daemon=True)
    writer.start()
    done: list[str] = []
    try:
        acks_after(200, "first acks")
        for kind, hard in FAULTS:
            what = f"{'hard' if hard else 'clean'} {kind}"
            leader = c.wait_isr(TOPIC, 0, what=f"full ISR before the {what}").leader
            before = len(acked)
            if hard:
                c.kill9(leader)
            else:
                assert c.sigterm(leader) == 0  # controlled shutdown moves the leadership first
            if kind == "bounce":
                c.broker(leader).start()  # at once (after kill -9: registers once its old session expired)
                c.wait_registered([leader], timeout_s=60)
            else:
                # down while the producer goes on: a new leader, acknowledged writes without this broker
                c.wait_leader(TOPIC, 0, timeout_s=60, exclude=[leader])
                acks_after(len(acked), f"acks while the leader is down after its {what}")
                c.broker(leader).start()
            acks_after(before, f"acks after the leader's {what}")
            c.wait_isr(TOPIC, 0, what=f"broker {leader} back in the ISR after its {what}")
            done.append(f"{what} of {leader}")
    finally:
        stop.set()
        writer.join(90)
    assert not writer.is_alive()
    assert len(done) == 8 and not errors, (done, errors[:5])
    print(f"{len(acked)} acknowledged through: {done}")
    values = read_all(c.bootstrap, TOPIC, 0, _end_offset(c))
    seen: dict[bytes, int] = {}
    for v in values:
        seen[v] = seen.get(v, 0) + 1
    dupes = [v for v, n in seen.items() if n > 1]
    assert not dupes, dupes[:5]
    missing = [v for v in acked if v not in seen]
    assert not missing, (len(missing), missing[:5])
    # the replicas hold the same bytes, and kafkad-replica-verification says so over the wire
    c.wait_until(
        lambda: len({replica_bytes(c, b, TOPIC, 0) for b in c.ids}) == 1 or None, 30, "identical replicas"
    )
    tool = subprocess.run(
        [sys.executable, "-m", "kafkad.tools.replica_verification", "--broker-list", c.bootstrap,
         "--topic-white-list", TOPIC, "--once", "--max-wait-ms", "200"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert tool.returncode == 0, tool.stdout + tool.stderr
    assert "max lag is 0 for partition [acked,0]" in tool.stdout, tool.stdout


def _end_offset(c: KafkadCluster) -> int:
    consumer = Consumer({"bootstrap.servers": c.bootstrap, "group.id": "hw"})
    try:
        _low, high = consumer.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=30)
        return int(high)
    finally:
        consumer.close()


def test_two_of_three_down_acks_all_refused_acks_1_works(
    zk_server: ZooKeeperServer, kafkad_cluster: Callable[..., KafkadCluster]
) -> None:
    c = kafkad_cluster(zk_server.connect_string, 3, overrides=OVERRIDES)
    c.wait_registered([1, 2, 3], timeout_s=30)
    c.wait_controller(timeout_s=30)
    assert create_topic(c.bootstrap.split(",")[0], TOPIC, 1, 3)["error_code"] == 0
    state = c.wait_isr(TOPIC, 0, timeout_s=30)
    survivor = state.leader
    for b in c.ids:
        if b != survivor:
            c.kill9(b)

    def produce_one(acks: str) -> str | None:
        p = Producer(
            {
                "bootstrap.servers": c.broker(survivor).bootstrap,
                "acks": acks,
                # retries 0: NOT_ENOUGH_REPLICAS comes back at once; the time allowed is for a fresh
                # client's metadata round trips, which may first try the dead brokers it was told about
                # (5 s were not always enough at load average 4)
                "message.timeout.ms": 25000,
                "retries": 0,
            }
        )
        result: list[str | None] = []
        p.produce(
            TOPIC,
            value=b"x",
            partition=0,
            on_delivery=lambda err, _m: result.append(None if err is None else err.name()),
        )
        p.flush(30)
        return result[0] if result else "no delivery report"

    # An acks=1 write leaves the dead followers behind the leader's log end: after replica.lag.time.max.ms
    # the leader itself shrinks the ISR through the IsrWriter (Kafka's rule: an idle partition's dead
    # followers are the controller's to remove).
    assert produce_one("1") is None
    c.wait_until(
        lambda: (s := c.partition_state(TOPIC, 0)) is not None and s.isr == (survivor,) and s,
        60,
        "the ISR shrunk to the survivor",
    )
    assert produce_one("all") == "NOT_ENOUGH_REPLICAS"
    assert produce_one("1") is None


def test_group_coordinator_follows_offsets_leadership(
    zk_server: ZooKeeperServer, kafkad_cluster: Callable[..., KafkadCluster]
) -> None:
    c = kafkad_cluster(
        zk_server.connect_string,
        3,
        overrides={
            **FAST_EXPIRY,
            "offsets.topic.num.partitions": "3",
            "offsets.topic.replication.factor": "3",
        },
    )
    c.wait_registered([1, 2, 3], timeout_s=30)
    c.wait_controller(timeout_s=30)
    assert create_topic(c.bootstrap.split(",")[0], TOPIC, 1, 3)["error_code"] == 0
    c.wait_isr(TOPIC, 0, timeout_s=30)
    p = Producer({"bootstrap.servers": c.bootstrap, "acks": "all"})
    for i in range(100):
        p.produce(TOPIC, value=b"m%03d" % i, partition=0)
    assert p.flush(30) == 0

    from kafka import KafkaConsumer
    from kafka import TopicPartition as KpTopicPartition
    from kafka.structs import OffsetAndMetadata

    from kafkad.coordinator.group.records import partition_for

    # a confluent-kafka group and a kafka-python group whose offsets live in the same __consumer_offsets
    # partition, so one kill -9 takes away the coordinator of both
    gp = partition_for("g1", 3)
    kp_group = next(g for g in (f"kp-{i}" for i in range(100)) if partition_for(g, 3) == gp)

    def ck_consume(n: int, commit: bool) -> list[int]:
        consumer = Consumer(
            {
                "bootstrap.servers": c.bootstrap,
                "group.id": "g1",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "session.timeout.ms": 6000,
            }
        )
        try:
            consumer.subscribe([TOPIC])
            got: list[int] = []
            deadline = time.monotonic() + 60
            while len(got) < n and time.monotonic() < deadline:
                msg = consumer.poll(0.5)
                if msg is not None and not msg.error() and (o := msg.offset()) is not None:
                    got.append(o)
            if commit and got:
                consumer.commit(offsets=[TopicPartition(TOPIC, 0, got[-1] + 1)], asynchronous=False)
            return got
        finally:
            consumer.close()

    def kp_consume(n: int, commit: bool) -> list[int]:
        consumer = KafkaConsumer(
            TOPIC,
            bootstrap_servers=c.bootstrap,
            group_id=kp_group,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            session_timeout_ms=6000,
            request_timeout_ms=10000,
        )
        try:
            got: list[int] = []
            deadline = time.monotonic() + 60
            while len(got) < n and time.monotonic() < deadline:
                for msgs in consumer.poll(timeout_ms=500, max_records=n - len(got)).values():
                    got.extend(m.offset for m in msgs)
            if commit and got:
                consumer.commit({KpTopicPartition(TOPIC, 0): OffsetAndMetadata(got[-1] + 1, "", -1)})
            return got
        finally:
            consumer.close()

    first = ck_consume(50, commit=True)
    assert first[:1] == [0] and len(first) >= 50
    committed = first[-1] + 1
    kp_first = kp_consume(30, commit=True)
    assert kp_first == list(range(30)), kp_first
    # the coordinator is the leader of the groups' __consumer_offsets partition, all three replicas in its
    # ISR; a commit is answered once the ISR has it, so killing the coordinator right away loses nothing
    c.wait_isr("__consumer_offsets", gp, timeout_s=30)
    coordinator = c.wait_leader("__consumer_offsets", gp, timeout_s=30).leader
    c.kill9(coordinator)
    new = c.wait_leader("__consumer_offsets", gp, timeout_s=30, exclude=[coordinator]).leader
    survivor = c.broker(next(b for b in c.ids if b != coordinator)).bootstrap

    def coordinator_of(group: str) -> int | None:
        got = request(survivor, ApiKey.FIND_COORDINATOR, 1, {"key": group, "key_type": 0})
        return int(got["node_id"]) if got["error_code"] == 0 else None

    for group in ("g1", kp_group):
        c.wait_until(lambda g=group: coordinator_of(g) == new, 30, f"{group}'s coordinator is broker {new}")  # type: ignore[misc]
    # the committed offsets, read back (OffsetFetch) from the new coordinator by each client
    reader = Consumer({"bootstrap.servers": c.bootstrap, "group.id": "g1", "enable.auto.commit": False})
    try:
        (tp,) = reader.committed([TopicPartition(TOPIC, 0)], timeout=30)
        assert tp.offset == committed, (tp, committed)
    finally:
        reader.close()
    kp_reader = KafkaConsumer(bootstrap_servers=c.bootstrap, group_id=kp_group, enable_auto_commit=False)
    try:
        assert kp_reader.committed(KpTopicPartition(TOPIC, 0), timeout_ms=30000) == 30
    finally:
        kp_reader.close()
    # and both groups resume where they committed, re-reading nothing
    second = ck_consume(10, commit=False)
    assert second[:1] == [committed], (committed, second[:5])
    kp_second = kp_consume(10, commit=False)
    assert kp_second[:1] == [30], kp_second[:5]


def test_rack_aware_reads_go_to_the_in_sync_replica_in_the_consumers_rack(
    zk_server: ZooKeeperServer, kafkad_cluster: Callable[..., KafkadCluster]
) -> None:
    selector = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
    c = kafkad_cluster(
        zk_server.connect_string,
        3,
        overrides={**OVERRIDES, "replica.selector.class": selector},
        broker_overrides={b: {"broker.rack": f"rack{b}"} for b in (1, 2, 3)},
    )
    c.wait_registered([1, 2, 3], timeout_s=30)
    c.wait_controller(timeout_s=30)
    assert create_topic(c.bootstrap.split(",")[0], TOPIC, 1, 3)["error_code"] == 0
    state = c.wait_isr(TOPIC, 0, timeout_s=30)
    p = Producer({"bootstrap.servers": c.bootstrap, "acks": "all"})
    for i in range(200):
        p.produce(TOPIC, value=b"r%03d" % i, partition=0)
    assert p.flush(30) == 0
    follower = next(b for b in c.ids if b != state.leader)

    def fetch(bid: int, rack: str) -> dict[str, Any]:
        body = fetch_body(TOPIC, 0, 0, 1 << 20, rack_id=rack)
        return request(c.broker(bid).bootstrap, ApiKey.FETCH, 11, body)["responses"][0]["partitions"][0]  # type: ignore[no-any-return]

    # the leader points a consumer of the follower's rack there, and serves its own rack itself
    redirected = fetch(state.leader, f"rack{follower}")
    assert redirected["preferred_read_replica"] == follower and not redirected["records"], redirected
    local = fetch(state.leader, f"rack{state.leader}")
    assert local["preferred_read_replica"] == -1 and local["records"]
    # a consumer with client.rack reads everything (librdkafka follows the preferred replica)
    consumer = Consumer(
        {
            "bootstrap.servers": c.bootstrap,
            "group.id": "rack-reader",
            "client.rack": f"rack{follower}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.assign([TopicPartition(TOPIC, 0, 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(got) < 200 and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error() and (v := msg.value()) is not None:
                got.append(v)
        assert got == [b"r%03d" % i for i in range(200)]
    finally:
        consumer.close()
