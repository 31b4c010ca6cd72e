"""Znode codecs: Kafka's JSON shapes (zookeeper-layout.md), including what older Kafka versions wrote."""

from __future__ import annotations

import json

from kafkad.zk import znodes as Z


def test_controller_and_epoch() -> None:
    data = Z.ControllerZNode.encode(3, "1700000000000")
    assert json.loads(data) == {"version": 1, "brokerid": 3, "timestamp": "1700000000000"}
    assert Z.ControllerZNode.decode(data) == 3
    assert Z.ControllerZNode.decode(b"7") == 7  # Kafka 0.8 wrote a bare id
    assert (
        Z.ControllerZNode.decode(b'{"version":2,"brokerid":1,"timestamp":"1","kraftControllerEpoch":-1}') == 1
    )
    assert Z.ControllerEpochZNode.encode(12) == b"12"
    assert Z.ControllerEpochZNode.decode(b"12") == 12


def test_broker_registration() -> None:
    info = Z.BrokerInfo(2, "10.0.0.2", 9092, "r1")
    d = json.loads(Z.BrokerIdZNode.encode(info, "5"))
    assert d == {
        "version": 4,
        "host": "10.0.0.2",
        "port": 9092,
        "endpoints": ["PLAINTEXT://10.0.0.2:9092"],
        "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT"},
        "jmx_port": -1,
        "timestamp": "5",
        "rack": "r1",
    }
    assert Z.BrokerIdZNode.decode(2, Z.BrokerIdZNode.encode(info), 99) == info._replace(epoch=99)
    assert Z.BrokerIdZNode.path(2) == "/brokers/ids/2"
    # Kafka with a host-less registration (listeners only in endpoints) and no rack
    kafka = b'{"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},"endpoints":["PLAINTEXT://h1:9093"],"jmx_port":-1,"host":null,"timestamp":"1","port":-1,"version":4}'
    assert Z.BrokerIdZNode.decode(5, kafka) == Z.BrokerInfo(5, "h1", 9093, None, "PLAINTEXT", -1)


def test_topic_assignment_versions() -> None:
    a = Z.TopicAssignment({0: (1, 2), 1: (2, 3)}, "AAAAAAAAAAAAAAAAAAAAAA")
    d = json.loads(Z.TopicZNode.encode(a))
    assert d == {
        "version": 3,
        "partitions": {"0": [1, 2], "1": [2, 3]},
        "adding_replicas": {},
        "removing_replicas": {},
        "topic_id": "AAAAAAAAAAAAAAAAAAAAAA",
    }
    assert Z.TopicZNode.decode(Z.TopicZNode.encode(a)) == a
    old = Z.TopicZNode.decode(b'{"version":1,"partitions":{"0":[1]}}')
    assert old.partitions == {0: (1,)} and old.topic_id is None and old.adding == {}


def test_partition_state() -> None:
    s = Z.PartitionState(1, 4, (1, 2), 7)
    d = json.loads(Z.PartitionStateZNode.encode(s))
    assert d == {"controller_epoch": 7, "leader": 1, "version": 1, "leader_epoch": 4, "isr": [1, 2]}
    assert Z.PartitionStateZNode.decode(Z.PartitionStateZNode.encode(s), 9) == s._replace(zk_version=9)
    assert Z.PartitionStateZNode.path("t", 3) == "/brokers/topics/t/partitions/3/state"


def test_admin_and_misc_znodes() -> None:
    assert json.loads(Z.ClusterIdZNode.encode("abc")) == {"version": "1", "id": "abc"}
    assert Z.ClusterIdZNode.decode(b'{"version":"1","id":"xyz"}') == "xyz"
    assert json.loads(Z.TopicConfigZNode.encode({"retention.ms": "5"})) == {
        "version": 1,
        "config": {"retention.ms": "5"},
    }
    assert Z.TopicConfigZNode.decode(b'{"version":1,"config":{"a":"b"}}') == {"a": "b"}
    assert json.loads(Z.ConfigChangeZNode.encode("topics/t")) == {"version": 2, "entity_path": "topics/t"}
    n = Z.IsrChangeNotificationZNode.encode([("t", 0), ("u", 2)])
    assert json.loads(n) == {
        "version": 1,
        "partitions": [{"topic": "t", "partition": 0}, {"topic": "u", "partition": 2}],
    }
    assert Z.IsrChangeNotificationZNode.decode(n) == [("t", 0), ("u", 2)]
    r = Z.ReassignPartitionsZNode.encode({("t", 0): [1, 2]})
    assert json.loads(r) == {"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1, 2]}]}
    assert Z.ReassignPartitionsZNode.decode(r) == {("t", 0): (1, 2)}
    assert Z.PreferredReplicaElectionZNode.decode(Z.PreferredReplicaElectionZNode.encode([("t", 1)])) == [
        ("t", 1)
    ]


def test_producer_id_blocks() -> None:
    first = Z.ProducerIdBlockZNode.next_block(None, 1)
    assert first == Z.ProducerIdBlock(1, 0, 999)
    d = json.loads(Z.ProducerIdBlockZNode.encode(first))
    assert d == {"version": 1, "broker": 1, "block_start": "0", "block_end": "999"}
    assert Z.ProducerIdBlockZNode.decode(Z.ProducerIdBlockZNode.encode(first)) == first
    assert Z.ProducerIdBlockZNode.next_block(first, 2) == Z.ProducerIdBlock(2, 1000, 1999)
    assert Z.ProducerIdBlockZNode.decode(b"") is None
