"""Admin requests sent to a broker that neither leads the topic nor is the controller nor holds a replica
(issue 10 item 4: DeleteRecords, DescribeConfigs/AlterConfigs and CreatePartitions work from any broker with
the cluster's answer). Each effect is checked where it must land: in ZooKeeper, on the leader, on the
follower, and through clients bootstrapped at that broker alone.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient  # type: ignore[attr-defined]

from kafkad.protocol import ApiKey
from tests.cluster.cluster import KafkadCluster
from tests.cluster.test_election import fetch_body, request
from tests.cluster.zookeeper import ZooKeeperServer

pytestmark = [pytest.mark.system, pytest.mark.timeout(180)]

TOPIC = "anyb"
TOPIC_TYPE = 2  # ConfigResource type TOPIC
NOT_LEADER_OR_FOLLOWER = 6
DYNAMIC_TOPIC_CONFIG = 1


def describe_topic(c: KafkadCluster, bid: int, key: str) -> dict[str, Any]:
    body = {
        "resources": [{"resource_type": TOPIC_TYPE, "resource_name": TOPIC, "configuration_keys": [key]}],
        "include_synonyms": False,
    }
    (res,) = request(c.broker(bid).bootstrap, ApiKey.DESCRIBE_CONFIGS, 2, body)["results"]
    assert res["error_code"] == 0, res
    (entry,) = res["configs"]
    return dict(entry)


def low_watermark(c: KafkadCluster, bootstrap: str, partition: int) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "lw"})
    try:
        low, _high = consumer.get_watermark_offsets(TopicPartition(TOPIC, partition), timeout=30)
        return int(low)
    finally:
        consumer.close()


def test_delete_records_configs_and_partitions_from_a_broker_without_a_replica(
    zk_server: ZooKeeperServer, kafkad_cluster: Callable[..., KafkadCluster]
) -> None:
    c = kafkad_cluster(zk_server.connect_string, 3)
    c.wait_registered([1, 2, 3], timeout_s=30)
    controller = c.wait_controller(timeout_s=30)
    leader, outsider = (b for b in c.ids if b != controller)
    far = c.broker(outsider).bootstrap  # every request below goes here: no replica, not the controller
    body = {
        "topics": [
            {
                "name": TOPIC,
                "num_partitions": -1,
                "replication_factor": -1,
                "assignments": [{"partition_index": 0, "broker_ids": [leader, controller]}],
                "configs": [],
            }
        ],
        "timeout_ms": 30000,
        "validate_only": False,
    }
    assert request(far, ApiKey.CREATE_TOPICS, 4, body)["topics"][0]["error_code"] == 0
    assert c.wait_isr(TOPIC, 0, size=2, timeout_s=30).leader == leader
    p = Producer({"bootstrap.servers": far, "acks": "all"})
    for i in range(100):
        p.produce(TOPIC, value=b"r%03d" % i, partition=0)
    assert p.flush(30) == 0

    # AlterConfigs: /config/topics/<t> + a change notification; the leader and the follower apply it, and
    # the outsider describes the cluster's value
    alter = {
        "resources": [
            {
                "resource_type": TOPIC_TYPE,
                "resource_name": TOPIC,
                "configs": [{"name": "retention.ms", "value": "12345"}],
            }
        ],
        "validate_only": False,
    }
    (res,) = request(far, ApiKey.ALTER_CONFIGS, 1, alter)["responses"]
    assert res["error_code"] == 0, res
    assert c.zk._json(f"/config/topics/{TOPIC}") is not None
    assert c.zk._json(f"/config/topics/{TOPIC}")[0]["config"] == {"retention.ms": "12345"}  # type: ignore[index]
    for bid in (leader, controller, outsider):
        entry = c.wait_until(
            lambda b=bid: (e := describe_topic(c, b, "retention.ms"))["value"] == "12345" and e,  # type: ignore[misc]
            30,
            f"broker {bid} describes retention.ms=12345",
        )
        assert entry["config_source"] == DYNAMIC_TOPIC_CONFIG, entry

    # CreatePartitions: the new partitions' assignment in ZooKeeper, leaders and ISRs elected, writable
    grow = {
        "topics": [{"name": TOPIC, "count": 3, "assignments": None}],
        "timeout_ms": 30000,
        "validate_only": False,
    }
    (res,) = request(far, ApiKey.CREATE_PARTITIONS, 1, grow)["results"]
    assert res["error_code"] == 0, res
    assignment = c.zk.assignment(TOPIC)
    assert sorted(assignment) == [0, 1, 2] and all(len(r) == 2 for r in assignment.values()), assignment
    for part in (1, 2):
        c.wait_isr(TOPIC, part, size=2, timeout_s=30)

    def outsider_knows() -> bool:
        md = request(far, ApiKey.METADATA, 8, {"topics": [{"name": TOPIC}]})
        parts = md["topics"][0]["partitions"]
        return len(parts) == 3 and all(
            x["leader_id"] == c.leader_of(TOPIC, x["partition_index"]) for x in parts
        )

    c.wait_until(outsider_knows, 30, "the outsider's Metadata shows 3 partitions and their leaders")
    p = Producer({"bootstrap.servers": far, "acks": "all"})
    for part in (1, 2):
        p.produce(TOPIC, value=b"new", partition=part)
    assert p.flush(30) == 0

    # DeleteRecords: a broker that does not lead the partition answers as Kafka's does (the client goes
    # to the leader Metadata names); an admin client bootstrapped at the outsider alone deletes through
    # the leader, whose log start offset moves, and the follower's follows
    drop = {
        "topics": [{"name": TOPIC, "partitions": [{"partition_index": 0, "offset": 40}]}],
        "timeout_ms": 30000,
    }
    (part0,) = request(far, ApiKey.DELETE_RECORDS, 1, drop)["topics"][0]["partitions"]
    assert part0["error_code"] == NOT_LEADER_OR_FOLLOWER, part0
    # so do Fetch, ListOffsets and OffsetForLeaderEpoch (Kafka's getPartitionOrError: a partition the
    # cluster has but this broker holds no replica of), never UNKNOWN_TOPIC_OR_PARTITION
    fetched = request(far, ApiKey.FETCH, 11, fetch_body(TOPIC, 0, 0, 1024))["responses"][0]["partitions"][0]
    assert fetched["error_code"] == NOT_LEADER_OR_FOLLOWER, fetched
    listed = request(
        far,
        ApiKey.LIST_OFFSETS,
        5,
        {
            "replica_id": -1,
            "isolation_level": 0,
            "topics": [{"name": TOPIC, "partitions": [{"partition_index": 0, "timestamp": -1}]}],
        },
    )["topics"][0]["partitions"][0]
    assert listed["error_code"] == NOT_LEADER_OR_FOLLOWER, listed
    epochs = request(
        far,
        ApiKey.OFFSET_FOR_LEADER_EPOCH,
        3,
        {
            "replica_id": -1,
            "topics": [
                {
                    "topic": TOPIC,
                    "partitions": [{"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}],
                }
            ],
        },
    )["topics"][0]["partitions"][0]
    assert epochs["error_code"] == NOT_LEADER_OR_FOLLOWER, epochs
    admin = AdminClient({"bootstrap.servers": far})
    (fut,) = admin.delete_records([TopicPartition(TOPIC, 0, 40)]).values()
    assert fut.result(30).low_watermark == 40
    assert low_watermark(c, c.broker(leader).bootstrap, 0) == 40
    assert low_watermark(c, far, 0) == 40

    def follower_start() -> int:
        body = fetch_body(TOPIC, 0, 40, 1024)
        got = request(c.broker(controller).bootstrap, ApiKey.FETCH, 11, body)["responses"][0]["partitions"][0]
        assert got["error_code"] == 0, got
        return int(got["log_start_offset"])

    c.wait_until(lambda: follower_start() == 40, 30, "the follower's log start offset follows the leader's")
    first = Consumer({"bootstrap.servers": far, "group.id": "after-delete", "auto.offset.reset": "earliest"})
    try:
        first.assign([TopicPartition(TOPIC, 0, -2)])  # OFFSET_BEGINNING

        def one() -> tuple[int | None, bytes | None] | None:
            m = first.poll(0.5)
            return (m.offset(), m.value()) if m is not None and m.error() is None else None

        assert c.wait_until(one, 30, "the first record after the deletion") == (40, b"r040")
    finally:
        first.close()
