"""Real clients against a kafkad cluster (issue 15): the AdminClient's elect_leaders over the wire
(ElectLeaders -> the controller), and clients reacting to NOT_LEADER_OR_FOLLOWER from a broker that lost
leadership: a confluent producer refreshes its metadata and delivers to the new leader, a kafka-python
consumer finds the new leader and keeps reading."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable

import pytest

from tests.cluster.cluster import KafkadCluster
from tests.cluster.zookeeper import ZooKeeperServer

pytestmark = [pytest.mark.system, pytest.mark.timeout(300)]


class _Captured(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def test_elect_leaders_over_the_wire_and_producer_follows_the_new_leader(
    zk_server: ZooKeeperServer, kafkad_cluster: Callable[..., KafkadCluster]
) -> None:
    from confluent_kafka import Consumer, ElectionType, KafkaError, KafkaException, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    c = kafkad_cluster(zk_server.connect_string, 3, overrides={"controlled.shutdown.retry.backoff.ms": "200"})
    c.wait_registered([1, 2, 3], timeout_s=60)
    c.wait_controller(timeout_s=60)
    topic = f"wire-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    # DescribeCluster from the metadata cache: every live broker, the controller ZooKeeper names
    described = c.wait_until(
        lambda: (
            (d := admin.describe_cluster(include_authorized_operations=True).result(30))
            and len(d.nodes) == 3
            and d
        ),
        60,
        "DescribeCluster lists the three brokers",
    )
    assert sorted(n.id for n in described.nodes) == [1, 2, 3]
    assert described.controller.id == c.controller_id()
    assert described.authorized_operations
    # the controller is the preferred replica: stopping it moves the controller too, the harder case
    # for the admin client, whose cached controller id goes stale
    controller = c.controller_id()
    assert controller is not None
    others = [b for b in (1, 2, 3) if b != controller]
    admin.create_topics([NewTopic(topic, num_partitions=1, replica_assignment=[[controller, *others]])])[
        topic
    ].result(60)
    c.wait_leader(topic, 0, timeout_s=30)
    preferred = c.replicas_of(topic, 0)[0]
    c.wait_until(lambda: c.leader_of(topic, 0) == preferred, 30, "the preferred replica leads")

    captured = _Captured()
    rd_log = logging.getLogger(f"rdkafka-{topic}")
    rd_log.addHandler(captured)
    rd_log.setLevel(logging.DEBUG)
    producer = Producer(
        {"bootstrap.servers": c.bootstrap, "acks": "all", "debug": "msg,metadata", "linger.ms": 0},
        logger=rd_log,
    )
    errors: list[str] = []

    def delivered(err: object, _msg: object) -> None:
        if err is not None:
            errors.append(str(err))

    def produce(value: bytes) -> None:
        producer.produce(topic, value, partition=0, on_delivery=delivered)
        assert producer.flush(60) == 0
        assert not errors, errors

    produce(b"before")
    # Leadership off the preferred replica: a clean stop moves it; the replica comes back as a follower.
    assert c.sigterm(preferred) == 0
    c.wait_until(lambda: c.leader_of(topic, 0) not in (None, -1, preferred), 60, "a new leader")
    c.restart(preferred)
    c.wait_registered([preferred], timeout_s=60)
    c.wait_until(lambda: preferred in c.partition_state(topic, 0).isr, 60, "back in the ISR")  # type: ignore[union-attr]
    interim = c.leader_of(topic, 0)
    produce(b"interim")  # the producer now knows `interim` as the leader
    # a kafka-python consumer reading from `interim` too: after the election its fetches there answer
    # NOT_LEADER_OR_FOLLOWER and it must find the new leader by itself
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KpTopicPartition

    kp = KafkaConsumer(bootstrap_servers=c.bootstrap, group_id=None, enable_auto_commit=False)
    kp_tp = KpTopicPartition(topic, 0)
    kp.assign([kp_tp])
    kp.seek(kp_tp, 0)
    kp_got: list[bytes] = []

    def kp_read(n: int) -> bool | None:
        for msgs in kp.poll(timeout_ms=200).values():
            kp_got.extend(m.value for m in msgs)
        return len(kp_got) >= n or None

    c.wait_until(lambda: kp_read(2), 60, "kafka-python reads from the interim leader")

    # The preferred election, asked over the wire (librdkafka sends ElectLeaders to the controller).
    tp = TopicPartition(topic, 0)

    def elect() -> dict[TopicPartition, KafkaError | None] | None:
        """ElectLeaders, as an operator's script does it: the admin client last refreshed its metadata
        before `preferred` (maybe the controller) was stopped, so it may still name the old controller,
        which answers NOT_CONTROLLER (Kafka does the same). Refresh and ask again."""
        try:
            return dict(admin.elect_leaders(ElectionType.PREFERRED, [tp]).result(60))
        except KafkaException as e:
            if e.args[0].code() != KafkaError.NOT_CONTROLLER:
                raise
            admin.list_topics(timeout=10)  # a Metadata round trip updates librdkafka's controller id
            return None

    result = c.wait_until(elect, 60, "ElectLeaders reaches the controller")
    assert list(result.values()) == [None], result
    c.wait_until(lambda: c.leader_of(topic, 0) == preferred, 30, "the preferred replica leads again")
    again = c.wait_until(elect, 60, "ElectLeaders reaches the controller")
    not_needed = next(iter(again.values()))
    assert not_needed is not None and not_needed.code() == 84, again  # ELECTION_NOT_NEEDED

    captured.lines.clear()
    produce(b"after")  # first sent to `interim`, which answers NOT_LEADER_OR_FOLLOWER
    text = "\n".join(captured.lines)
    assert "NOT_LEADER" in text.upper().replace(" ", "_"), text[-3000:]
    assert interim != preferred
    try:
        c.wait_until(lambda: kp_read(3), 60, "kafka-python follows the leader back to the preferred replica")
    finally:
        kp.close()
    assert kp_got == [b"before", b"interim", b"after"], kp_got

    consumer = Consumer(
        {"bootstrap.servers": c.bootstrap, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"}
    )
    got: list[bytes | None] = []
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])

        def read_three() -> bool | None:
            m = consumer.poll(0.5)
            if m is not None and not m.error():
                got.append(m.value())
            return len(got) >= 3 or None

        c.wait_until(read_three, 60, "three records read back")
    finally:
        consumer.close()
    assert got == [b"before", b"interim", b"after"], got


def test_dynamic_broker_default_reaches_every_broker_through_zookeeper(
    zk_server: ZooKeeperServer, kafkad_cluster: Callable[..., KafkadCluster]
) -> None:
    """`--entity-default` sent to one broker lands in /config/brokers/<default>; every broker applies it
    (the /config/changes notification) and a restarted broker loads it from ZooKeeper."""
    import subprocess
    import sys

    from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType  # type: ignore[attr-defined]

    c = kafkad_cluster(zk_server.connect_string, 3)
    c.wait_registered([1, 2, 3], timeout_s=60)
    c.wait_controller(timeout_s=60)
    tool = subprocess.run(
        [sys.executable, "-m", "kafkad.tools.configs", "--bootstrap-server", c.bootstrap, "--alter",
         "--entity-type", "brokers", "--entity-default", "--add-config", "log.retention.ms=4321000"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert tool.returncode == 0, tool.stderr
    admin = AdminClient({"bootstrap.servers": c.bootstrap})

    def retention_of(bid: int) -> str | None:
        (f,) = admin.describe_configs([ConfigResource(ResourceType.BROKER, str(bid))]).values()
        entry = f.result(30).get("log.retention.ms")
        return None if entry is None else entry.value

    for bid in (1, 2, 3):

        def applied(b: int = bid) -> bool | None:
            return retention_of(b) == "4321000" or None

        c.wait_until(applied, 60, f"broker {bid} applies it")
    victim = 2
    c.restart(victim)
    c.wait_registered([victim], timeout_s=60)
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    assert c.wait_until(lambda: retention_of(victim) == "4321000" or None, 60, "loaded from ZooKeeper")
