"""Group offsets for partitions the coordinator holds no replica of (issue 24, item 6).

On 3 brokers, a topic of 6 partitions with RF 1 puts 4 of them on brokers other than any given group's
coordinator (RF 2: 2 of them). Kafka's coordinator checks its metadata cache, not its own logs, before it
accepts an OffsetCommit or OffsetDelete; so must kafkad. Every client stack commits every partition of an
RF 1 and an RF 2 topic and reads the offsets back: confluent-kafka (consumer commit, admin alter / list),
kafka-python (consumer commit, admin alter / list / delete), aiokafka (consumer commit) and kafkajs (admin
setOffsets / fetchOffsets). Before the fix each commit of a partition not hosted by the coordinator failed
with UNKNOWN_TOPIC_OR_PARTITION.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.cluster.cluster import KafkadCluster
from tests.cluster.zookeeper import ZooKeeperServer

pytestmark = [pytest.mark.system, pytest.mark.timeout(420)]

PARTITIONS = 6
KAFKAJS = Path(__file__).resolve().parents[1] / "integration" / "kafkajs"


def _topics(c: KafkadCluster) -> list[str]:
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    suffix = uuid.uuid4().hex[:6]
    topics = [f"rf1-{suffix}", f"rf2-{suffix}"]
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    futures = admin.create_topics(
        [
            NewTopic(t, num_partitions=PARTITIONS, replication_factor=rf)
            for t, rf in zip(topics, (1, 2), strict=True)
        ]
    )
    for f in futures.values():
        f.result(60)
    for t in topics:
        for p in range(PARTITIONS):
            c.wait_leader(t, p, timeout_s=60)
    # each broker leads some partitions of the RF 1 topic, so every coordinator lacks some of them
    assert len({c.leader_of(topics[0], p) for p in range(PARTITIONS)}) == 3
    return topics


def _expected(topics: list[str], offset: int) -> dict[tuple[str, int], int]:
    return {(t, p): offset for t in topics for p in range(PARTITIONS)}


def _confluent(bootstrap: str, topics: list[str]) -> None:
    from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient  # type: ignore[attr-defined]

    group = f"g-confluent-{uuid.uuid4().hex[:6]}"
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        tps = [TopicPartition(t, p, 7) for t in topics for p in range(PARTITIONS)]
        committed = consumer.commit(offsets=tps, asynchronous=False)
        assert committed is not None
        assert [(tp.topic, tp.partition, tp.error) for tp in committed if tp.error is not None] == []
        back = consumer.committed([TopicPartition(t, p) for t, p in _expected(topics, 7)], timeout=30)
        assert {(tp.topic, tp.partition): tp.offset for tp in back} == _expected(topics, 7)
    finally:
        consumer.close()

    admin = AdminClient({"bootstrap.servers": bootstrap})
    altered = admin.alter_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group, [TopicPartition(t, p, 11) for t, p in _expected(topics, 0)])]
    )[group].result(30)
    assert [tp for tp in altered.topic_partitions if tp.error is not None] == []
    listed = admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group, [TopicPartition(t, p) for t, p in _expected(topics, 0)])]
    )[group].result(30)
    assert {(tp.topic, tp.partition): tp.offset for tp in listed.topic_partitions} == _expected(topics, 11)


def _kafka_python(bootstrap: str, topics: list[str]) -> None:
    from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    group = f"g-kafka-python-{uuid.uuid4().hex[:6]}"
    fields = OffsetAndMetadata._fields
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        offsets = {
            TopicPartition(t, p): OffsetAndMetadata(*((13, "") if len(fields) == 2 else (13, "", -1)))
            for t, p in _expected(topics, 0)
        }
        consumer.commit(offsets)  # raises CommitFailedError / a KafkaError on any partition's error
        assert {(tp.topic, tp.partition): consumer.committed(tp) for tp in offsets} == _expected(topics, 13)
    finally:
        consumer.close()
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        listed = admin.list_group_offsets({group: None})[group]
        assert {(tp.topic, tp.partition): om.offset for tp, om in listed.items()} == _expected(topics, 13)
        altered = admin.alter_group_offsets(group, {tp: offsets[tp]._replace(offset=23) for tp in offsets})
        assert {tp: e.__name__ for tp, e in altered.items() if e.errno != 0} == {}
        listed = admin.list_group_offsets({group: None})[group]
        assert {(tp.topic, tp.partition): om.offset for tp, om in listed.items()} == _expected(topics, 23)
        deleted = admin.delete_group_offsets(group, list(offsets))
        assert {tp: e.__name__ for tp, e in deleted.items() if e.errno != 0} == {}
        assert admin.list_group_offsets({group: None})[group] == {}
    finally:
        admin.close()


def _aiokafka(bootstrap: str, topics: list[str]) -> None:
    from aiokafka import AIOKafkaConsumer, TopicPartition
    from aiokafka.structs import OffsetAndMetadata

    group = f"g-aiokafka-{uuid.uuid4().hex[:6]}"

    async def run() -> dict[tuple[str, int], int]:
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
        await consumer.start()
        try:
            tps = [TopicPartition(t, p) for t, p in _expected(topics, 0)]
            consumer.assign(tps)
            await consumer.commit({tp: OffsetAndMetadata(17, "") for tp in tps})
            return {(tp.topic, tp.partition): await consumer.committed(tp) for tp in tps}
        finally:
            await consumer.stop()

    assert asyncio.run(run()) == _expected(topics, 17)


def _kafkajs(bootstrap: str, topics: list[str]) -> None:
    node = shutil.which("node")
    assert node, "node is required for the kafkajs test (`make test` checks for it)"
    assert (KAFKAJS / "node_modules" / "kafkajs").is_dir(), "kafkajs is not installed: run `make test`"
    group = f"g-kafkajs-{uuid.uuid4().hex[:6]}"
    proc = subprocess.run(
        [node, str(KAFKAJS / "group_offsets.js"), bootstrap, group, ",".join(topics), "19"],
        capture_output=True,
        timeout=180,
        cwd=KAFKAJS,
    )
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-4000:]
    fetched = json.loads(proc.stdout.decode().strip().splitlines()[-1])["fetched"]
    got = {(t, int(p)): o for t, parts in fetched.items() for p, o in parts.items()}
    assert got == _expected(topics, 19)


STACKS: dict[str, Callable[[str, list[str]], None]] = {
    "confluent-kafka": _confluent,
    "kafka-python": _kafka_python,
    "aiokafka": _aiokafka,
    "kafkajs": _kafkajs,
}


def test_every_stack_commits_offsets_of_partitions_the_coordinator_does_not_host(
    zk_server: ZooKeeperServer, kafkad_cluster: Callable[..., KafkadCluster]
) -> None:
    c = kafkad_cluster(zk_server.connect_string, 3)
    c.wait_registered([1, 2, 3], timeout_s=60)
    c.wait_controller(timeout_s=60)
    topics = _topics(c)
    failures: dict[str, str] = {}
    for name, run in STACKS.items():
        try:
            run(c.bootstrap, topics)
        except Exception as exc:  # every stack is tried; the failures are reported together
            failures[name] = f"{type(exc).__name__}: {exc}"
    assert failures == {}
