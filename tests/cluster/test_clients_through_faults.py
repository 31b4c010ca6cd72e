"""Real clients of both kinds through issue 10's faults, on one ZooKeeper and on a 3-node ensemble.

A confluent-kafka (idempotent, acks=all) and a kafka-python (acks=all) producer write continuously to a
3-partition RF 3 topic while a confluent-kafka and a kafka-python group consumer (each its own group,
committing automatically) read it. The cluster goes through, in turn: SIGTERM of a leader (`systemctl stop`,
controlled shutdown), kill -9 of the controller, SIGSTOP of the controller past the ZooKeeper session
timeout; each broker is brought back before the next fault. After every fault each producer must be
acknowledged again and each group must read records written after the fault. At the end every acknowledged
record has been read by both groups, and the confluent producer's records are in the log exactly once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from kafka import KafkaConsumer, KafkaProducer

from tests.cluster.cluster import KafkadCluster
from tests.cluster.test_election import create_topic
from tests.cluster.test_replication import read_all

pytestmark = [pytest.mark.system, pytest.mark.timeout(240)]

TOPIC = "live"
PARTITIONS = 3
SESSION_MS = 4000


class Clients:
    """The four clients, each in its own thread; `acked[name]` / `seen[name]` grow as they work."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.stop = threading.Event()  # the producers
        self.stop_reading = threading.Event()  # the consumers, once they read everything acknowledged
        self.acked: dict[str, list[bytes]] = {"ck": [], "kp": []}
        self.errors: list[str] = []
        self.seen: dict[str, list[bytes]] = {"g-ck": [], "g-kp": []}
        self.threads = [
            threading.Thread(target=self._guard, args=(fn,), name=fn.__name__, daemon=True)
            for fn in (self._ck_producer, self._kp_producer, self._ck_consumer, self._kp_consumer)
        ]

    def start(self) -> None:
        for t in self.threads:
            t.start()

    def stop_producing(self) -> None:
        self.stop.set()
        for t in self.threads[:2]:
            t.join(120)
        alive = [t.name for t in self.threads[:2] if t.is_alive()]
        assert not alive, f"producer threads did not stop: {alive}"

    def close(self) -> None:
        self.stop.set()
        self.stop_reading.set()
        for t in self.threads:
            t.join(120)
        alive = [t.name for t in self.threads if t.is_alive()]
        assert not alive, f"client threads did not stop: {alive}"

    def _guard(self, fn: Callable[[], None]) -> None:
        try:
            fn()
        except Exception as e:  # a client that dies must fail the test, not vanish
            self.errors.append(f"{fn.__name__}: {e!r}")

    def _ck_producer(self) -> None:
        p = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "message.timeout.ms": 120000,
                "socket.timeout.ms": 10000,
                "linger.ms": 5,
            }
        )

        def done(err: Any, msg: Any) -> None:
            if err is None:
                self.acked["ck"].append(msg.value())
            else:
                self.errors.append(f"confluent producer: {err}")

        i = 0
        while not self.stop.is_set():
            try:
                p.produce(TOPIC, value=b"ck-%d" % i, on_delivery=done)
            except BufferError:
                p.poll(0.1)
                continue
            p.poll(0)
            i += 1
            time.sleep(0.003)
        assert p.flush(90) == 0, "confluent producer: records left unacknowledged"

    def _kp_producer(self) -> None:
        p = KafkaProducer(
            bootstrap_servers=self.bootstrap,
            acks="all",
            retries=1_000_000,
            retry_backoff_ms=100,
            request_timeout_ms=10000,
            delivery_timeout_ms=120000,
            linger_ms=5,
            max_in_flight_requests_per_connection=1,
        )
        i = 0
        try:
            while not self.stop.is_set():
                value = b"kp-%d" % i
                fut = p.send(TOPIC, value=value)
                fut.add_callback(lambda _md, v=value: self.acked["kp"].append(v))
                fut.add_errback(lambda e: self.errors.append(f"kafka-python producer: {e!r}"))
                i += 1
                time.sleep(0.005)
            p.flush(90)
        finally:
            p.close(30)

    def _ck_consumer(self) -> None:
        c = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": "g-ck",
                "auto.offset.reset": "earliest",
                "session.timeout.ms": 6000,
                "socket.timeout.ms": 10000,
                "auto.commit.interval.ms": 500,
            }
        )
        try:
            c.subscribe([TOPIC])
            while not self.stop_reading.is_set():
                m = c.poll(0.2)
                if m is not None and m.error() is None:
                    self.seen["g-ck"].append(m.value())  # type: ignore[arg-type]
        finally:
            c.close()

    def _kp_consumer(self) -> None:
        c = KafkaConsumer(
            TOPIC,
            bootstrap_servers=self.bootstrap,
            group_id="g-kp",
            auto_offset_reset="earliest",
            session_timeout_ms=6000,
            heartbeat_interval_ms=1000,
            request_timeout_ms=10000,
            auto_commit_interval_ms=500,
        )
        try:
            while not self.stop_reading.is_set():
                for msgs in c.poll(timeout_ms=200).values():
                    self.seen["g-kp"].extend(m.value for m in msgs)
        finally:
            c.close()

    def progress(self, c: KafkadCluster, what: str) -> None:
        """Both producers acknowledged again, then both groups read the newest of those records."""
        before = {k: len(v) for k, v in self.acked.items()}
        c.wait_until(
            lambda: self._check() and all(len(self.acked[k]) > n + 100 for k, n in before.items()),
            90,
            f"both producers acknowledged after {what} (acks {before})",
        )
        newest = {self.acked[k][-1] for k in self.acked}
        for g, got in self.seen.items():
            c.wait_until(
                lambda got=got: self._check() and newest <= set(got[-20000:]),  # type: ignore[misc]
                90,
                f"group {g} reads records written after {what}",
            )

    def _check(self) -> bool:
        assert not self.errors, self.errors[:5]
        return True


def _led_by(c: KafkadCluster, broker: int) -> list[int]:
    return [p for p in range(PARTITIONS) if c.leader_of(TOPIC, p) == broker]


def _full_isr(c: KafkadCluster) -> bool:
    return all((s := c.partition_state(TOPIC, p)) is not None and len(s.isr) == 3 for p in range(PARTITIONS))


def test_producers_and_groups_of_both_clients_survive_issue_10_faults(
    zk_any: Any, kafkad_cluster: Callable[..., KafkadCluster]
) -> None:
    c = kafkad_cluster(
        zk_any.connect_string,
        3,
        overrides={
            "controlled.shutdown.retry.backoff.ms": "200",
            "zookeeper.session.timeout.ms": str(SESSION_MS),
            "offsets.topic.num.partitions": "3",
            "offsets.topic.replication.factor": "3",
            "group.initial.rebalance.delay.ms": "0",
            "replica.lag.time.max.ms": "4000",
        },
    )
    c.wait_registered([1, 2, 3], timeout_s=30)
    controller = c.wait_controller(timeout_s=30)
    other = next(b for b in c.ids if b != controller)
    assert create_topic(c.broker(other).bootstrap, TOPIC, PARTITIONS, 3)["error_code"] == 0
    c.wait_until(lambda: _full_isr(c), 30, "full ISR")
    clients = Clients(c.bootstrap)
    clients.start()
    t0 = time.monotonic()
    try:
        clients.progress(c, "the start")

        # 1. systemctl stop of a leader that is not the controller: controlled shutdown moves its partitions
        controller = c.wait_controller(timeout_s=30)
        leader = next(b for b in c.ids if b != controller and _led_by(c, b))
        assert c.sigterm(leader) == 0
        assert not _led_by(c, leader)
        clients.progress(c, f"the SIGTERM of leader {leader}")
        c.restart(leader)
        c.wait_until(lambda: _full_isr(c), 60, f"broker {leader} back in every ISR")

        # 2. kill -9 of the controller: another takes over, the partitions it led get new leaders
        controller = c.wait_controller(timeout_s=30)
        c.kill9(controller)
        c.wait_controller(timeout_s=30, exclude=[controller])
        clients.progress(c, f"the kill -9 of controller {controller}")
        c.restart(controller)
        c.wait_until(lambda: _full_isr(c), 60, f"broker {controller} back in every ISR")

        # 3. SIGSTOP of the controller past the session timeout, then SIGCONT: it comes back as a follower
        controller = c.wait_controller(timeout_s=30)
        c.sigstop(controller)
        try:
            c.wait_controller(timeout_s=30, exclude=[controller])
            c.wait_until(lambda: not _led_by(c, controller), 30, f"no partition led by frozen {controller}")
            clients.progress(c, f"the SIGSTOP of controller {controller}")
        finally:
            c.sigcont(controller)
        c.wait_until(lambda: _full_isr(c), 60, f"broker {controller} back in every ISR")
        clients.progress(c, f"the SIGCONT of {controller}")
        clients.stop_producing()
        acked = {k: set(v) for k, v in clients.acked.items()}
        everything = acked["ck"] | acked["kp"]
        for g, got in clients.seen.items():
            c.wait_until(
                lambda got=got: clients._check() and everything <= set(got),  # type: ignore[misc]
                60,
                f"group {g} reads every acknowledged record",
            )
    finally:
        clients.close()
    assert not clients.errors, clients.errors[:5]
    # the idempotent producer's records are in the log exactly once (consumer groups may re-read after a
    # rebalance; the log itself must not hold a retried batch twice)
    ck = Consumer({"bootstrap.servers": c.bootstrap, "group.id": "ends"})
    try:
        ends = [ck.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=30)[1] for p in range(PARTITIONS)]
    finally:
        ck.close()
    in_log = [v for p in range(PARTITIONS) for v in read_all(c.bootstrap, TOPIC, p, ends[p])]
    ck_in_log = [v for v in in_log if v.startswith(b"ck-")]
    assert len(ck_in_log) == len(set(ck_in_log)), "the idempotent producer's records are duplicated"
    assert acked["ck"] <= set(ck_in_log)
    print(
        f"{len(clients.acked['ck'])} + {len(clients.acked['kp'])} acknowledged records, read by both groups "
        f"({time.monotonic() - t0:.1f}s)"
    )
