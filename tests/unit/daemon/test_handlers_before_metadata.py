"""Cluster mode before the controller's first UpdateMetadata (issue 24 item 3): DescribeCluster and
DeleteRecords wait for it, as Metadata does, instead of answering from the empty cache (DescribeCluster
named this broker the whole cluster and its own controller; DeleteRecords called a partition led
elsewhere unknown). Real handlers, ZooKeeper control plane and MetadataCache; its ClusterMode is a stand-in
(no ZooKeeper, no admin: these requests only read the cache)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from kafkad.api.broker import Broker
from kafkad.cluster import metadata as cluster_metadata
from kafkad.cluster.zookeeper import ZooKeeperControlPlane
from kafkad.network.registry import REGISTRY, RequestContext
from kafkad.protocol import ApiKey, ErrorCode, KafkaError, Request, RequestHeader
from kafkad.replication.metadata_cache import BrokerInfo, Endpoint, MetadataCache, PartitionState
from tests.unit.daemon.test_handlers import make_broker

OTHER = BrokerInfo(2, (Endpoint("10.0.0.2", 9092, "PLAINTEXT", 0),))
SELF = BrokerInfo(0, (Endpoint("127.0.0.1", 9092, "PLAINTEXT", 0),))


def cluster_broker(tmp_path: Path) -> tuple[Broker, MetadataCache]:
    b = make_broker(tmp_path, "zookeeper.connect=127.0.0.1:1")
    mode = SimpleNamespace(zk=None, admin=None, controller=None)
    plane = ZooKeeperControlPlane(mode, b.broker_id)  # type: ignore[arg-type]
    b.control_plane = plane
    b.replicas.cluster_has = plane.has_partition
    return b, plane.cache


async def call(b: Broker, api_key: int, version: int, body: dict[str, Any]) -> Any:
    spec = REGISTRY.get(api_key)
    assert spec is not None
    header = RequestHeader(api_key, version, 1, "test")
    return await spec.fn(RequestContext(b, header), Request(header, body))  # type: ignore[arg-type]


async def answered_after_update(
    b: Broker, cache: MetadataCache, api_key: int, version: int, body: Any
) -> Any:
    task = asyncio.ensure_future(call(b, api_key, version, body))
    for _ in range(20):
        await asyncio.sleep(0)
    waited = not task.done()
    state = PartitionState(2, 0, (2,), (2,), (), 0, 1)
    cache.update(2, 1, [SELF, OTHER], [("elsewhere", 0, state)])
    return waited, await asyncio.wait_for(task, 10)


def test_describe_cluster_waits_for_the_first_update_metadata(tmp_path: Path) -> None:
    b, cache = cluster_broker(tmp_path)
    body = {"include_cluster_authorized_operations": False}
    waited, out = asyncio.run(answered_after_update(b, cache, ApiKey.DESCRIBE_CLUSTER, 0, body))
    assert waited
    assert out["controller_id"] == 2, out
    assert sorted(br["broker_id"] for br in out["brokers"]) == [0, 2]


def test_delete_records_waits_for_the_first_update_metadata(tmp_path: Path) -> None:
    b, cache = cluster_broker(tmp_path)
    body = {
        "topics": [{"name": "elsewhere", "partitions": [{"partition_index": 0, "offset": -1}]}],
        "timeout_ms": 1000,
    }
    waited, out = asyncio.run(answered_after_update(b, cache, ApiKey.DELETE_RECORDS, 1, body))
    assert waited
    (p,) = out["topics"][0]["partitions"]
    assert p["error_code"] == ErrorCode.NOT_LEADER_OR_FOLLOWER, p  # led by broker 2: go there


def test_find_coordinator_without_metadata_answers_coordinator_not_available(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A broker the controller never updates: FindCoordinator gets the retriable error, not a closed
    connection (clients reconnected every CACHE_WAIT_S)."""
    monkeypatch.setattr(cluster_metadata, "CACHE_WAIT_S", 0.01)
    b, _cache = cluster_broker(tmp_path)
    with pytest.raises(KafkaError) as raised:
        asyncio.run(call(b, ApiKey.FIND_COORDINATOR, 1, {"key": "g", "key_type": 0}))
    assert raised.value.code == ErrorCode.COORDINATOR_NOT_AVAILABLE
