"""MetadataCache: UpdateMetadata bodies (as decoded from the wire) in, the cluster's view out."""

from __future__ import annotations

from kafkad.replication.metadata_cache import (
    LEADER_DURING_DELETE,
    Endpoint,
    MetadataCache,
    PartitionState,
    broker_from_wire,
    partition_state_from_wire,
)


def _state(leader: int, isr: tuple[int, ...] = (1, 2, 3)) -> PartitionState:
    return PartitionState(leader, 4, isr, (1, 2, 3), (), 7, 2)


def test_update_replaces_brokers_and_merges_partition_states() -> None:
    c = MetadataCache(broker_id=1)
    b1 = broker_from_wire(
        {"id": 1, "endpoints": [{"host": "h1", "port": 9092, "listener": "PLAINTEXT"}], "rack": "r1"}
    )
    b2 = broker_from_wire({"id": 2, "v0_host": "h2", "v0_port": 9093, "endpoints": []})
    c.update(3, 2, [b1, b2], [("t", 0, _state(1)), ("t", 1, _state(2))])
    assert c.controller_id == 3 and c.controller_epoch == 2
    assert [b.id for b in c.brokers()] == [1, 2]
    assert c.broker(2) is not None and c.broker(2).endpoint() == Endpoint("h2", 9093, "PLAINTEXT", 0)  # type: ignore[union-attr]
    assert c.leader_endpoint("t", 1) == Endpoint("h2", 9093, "PLAINTEXT", 0)
    assert c.topics() == {"t": 2}
    c.update(3, 2, [b1], [("t", 1, _state(1, (1,)))])
    assert not c.is_alive(2) and c.leader_endpoint("t", 0) == Endpoint("h1", 9092, "PLAINTEXT", 0)
    assert c.partition("t", 1) == _state(1, (1,)) and c.partition("t", 0) == _state(1)


def test_leader_during_delete_removes_the_partition() -> None:
    c = MetadataCache(broker_id=1)
    c.update(3, 2, [], [("t", 0, _state(1))])
    deleted = c.update(3, 2, [], [("t", 0, _state(LEADER_DURING_DELETE))])
    assert deleted == [("t", 0)] and not c.has_topic("t") and c.leader_endpoint("t", 0) is None


def test_partition_state_from_wire_accepts_both_request_shapes() -> None:
    um = {
        "leader": 2,
        "leader_epoch": 3,
        "isr": [2, 1],
        "replicas": [1, 2],
        "offline_replicas": [],
        "zk_version": 9,
        "controller_epoch": 1,
    }
    lai = {**um, "partition_epoch": 9}
    del lai["zk_version"], lai["offline_replicas"]
    assert (
        partition_state_from_wire(um)
        == partition_state_from_wire(lai)
        == PartitionState(2, 3, (2, 1), (1, 2), (), 9, 1)
    )
