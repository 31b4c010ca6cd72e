"""The ZooKeeper-mode Metadata answer's per-topic partition lists (cluster/metadata.py) are built once per
MetadataCache generation and rebuilt after every change: an UpdateMetadata (a new leader, a broker gone), a
single partition's state, a topic removed."""

from __future__ import annotations

from kafkad.cluster.metadata import _topic
from kafkad.protocol import ErrorCode
from kafkad.replication.metadata_cache import BrokerInfo, MetadataCache, PartitionState, broker_from_wire


def _state(leader: int, epoch: int = 4) -> PartitionState:
    return PartitionState(leader, epoch, (1, 2), (1, 2), (), 7, 2)


def _broker(i: int) -> BrokerInfo:
    return broker_from_wire(
        {"id": i, "endpoints": [{"host": "h", "port": 9090 + i, "listener": "PLAINTEXT"}]}
    )


def _leaders(cache: MetadataCache, topic: str = "t") -> list[tuple[int, int, int]]:
    return [(p["leader_id"], p["leader_epoch"], p["error_code"]) for p in _topic(cache, topic)["partitions"]]


def test_a_topic_list_is_built_once_per_generation() -> None:
    cache = MetadataCache(broker_id=1)
    b1, b2 = _broker(1), _broker(2)
    cache.update(1, 1, [b1, b2], [("t", 0, _state(1)), ("t", 1, _state(2))])
    first, again = _topic(cache, "t"), _topic(cache, "t")
    assert first is not again  # the topic entry is the caller's (api/metadata.py adds fields to it)
    assert first["partitions"] is again["partitions"]  # the partition list is not rebuilt


def test_every_change_rebuilds_the_lists() -> None:
    cache = MetadataCache(broker_id=1)
    b1, b2 = _broker(1), _broker(2)
    cache.update(1, 1, [b1, b2], [("t", 0, _state(1)), ("t", 1, _state(2))])
    assert _leaders(cache) == [(1, 4, 0), (2, 4, 0)]
    cache.update(1, 1, [b1, b2], [("t", 1, _state(1, 5))])  # a new leader
    assert _leaders(cache) == [(1, 4, 0), (1, 5, 0)]
    cache.update(1, 1, [b2], [])  # broker 1 gone, no partition state yet
    unavailable = int(ErrorCode.LEADER_NOT_AVAILABLE)
    assert _leaders(cache) == [(-1, 4, unavailable), (-1, 5, unavailable)]
    cache.set_partition("t", 0, _state(2, 6))
    assert _leaders(cache)[0] == (2, 6, 0)
    cache.remove_topic("t")
    assert _topic(cache, "t")["partitions"] == []
