"""Metadata and FindCoordinator of the ZooKeeper control plane (cluster/zookeeper.py): answered from the
MetadataCache (Kafka's
KafkaApis.handleTopicMetadataRequest / getPartitionMetadata and handleFindCoordinatorRequest).

Every live broker is listed with its endpoint on the listener the request came in on (else its first one);
each partition with its leader (LEADER_NOT_AVAILABLE when that broker is not alive), leader epoch, replicas,
ISR and offline replicas. Auto-created topics and __consumer_offsets are created through the ClusterAdmin
(ZooKeeper; the controller then assigns them) and answered LEADER_NOT_AVAILABLE / COORDINATOR_NOT_AVAILABLE
until the controller's UpdateMetadata names them, as Kafka does. The group coordinator of a group is the
leader of its __consumer_offsets partition.

Before the controller's first UpdateMetadata (a broker just (re)started) the cache is empty: both wait for
it up to CACHE_WAIT_S, then close the connection rather than answer "no brokers, no such topic" (librdkafka
2.x purges every broker a Metadata answer does not list and fails the topic: an idempotent producer then
never recovered, chaos bug 3). A closed connection makes the client ask another broker.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kafkad.cluster.local import unknown_topic_id
from kafkad.coordinator.group.config import OFFSETS_TOPIC
from kafkad.coordinator.group.records import partition_for
from kafkad.network.dispatcher import CloseConnection
from kafkad.protocol import ErrorCode, KafkaError
from kafkad.protocol.topic_names import INTERNAL_TOPICS, topic_name_error
from kafkad.replication.metadata_cache import MetadataCache

if TYPE_CHECKING:
    from kafkad.api.broker import Broker
    from kafkad.cluster.zookeeper import ZooKeeperControlPlane
    from kafkad.network.registry import RequestContext

log = logging.getLogger(__name__)

AUTHORIZED_OPS_OMITTED = -2147483648
# How long Metadata / FindCoordinator wait for the controller's first UpdateMetadata after a start: the
# controller sends it right after the broker's registration, which can wait for the previous session of
# a kill -9'd broker to expire (zookeeper.session.timeout.ms); clients time such requests out after 30 s
# (Java request.timeout.ms) or 60 s (librdkafka socket.timeout.ms).
CACHE_WAIT_S = 10.0


async def _initialized(cache: MetadataCache) -> None:
    """Return once the cache holds the controller's view; raises CloseConnection if it does not come."""
    if not cache.initialized and not await cache.wait_initialized(CACHE_WAIT_S):
        raise CloseConnection(f"no metadata from the controller within {CACHE_WAIT_S:.0f} s of the start")


class _PartitionLists:
    """Each topic's Metadata partition list, built once per MetadataCache generation: a client asking for
    a topic of 1,000 partitions every few ms (a producer after a leader change) cost the broker's loop
    ~2 ms per request rebuilding the same 1,000 dicts (~20 % of a new leader's py-spy samples in issue
    21's failover bench). Any UpdateMetadata or partition change bumps the cache's generation and drops
    them all. The lists are shared by the answers: the encoder reads them, nothing writes them."""

    __slots__ = ("generation", "lists")

    def __init__(self) -> None:
        self.generation = -1
        self.lists: dict[str, list[dict[str, Any]]] = {}


_LISTS: weakref.WeakKeyDictionary[MetadataCache, _PartitionLists] = weakref.WeakKeyDictionary()


def _partition_list(cache: MetadataCache, name: str) -> list[dict[str, Any]]:
    memo = _LISTS.get(cache)
    if memo is None:
        memo = _LISTS[cache] = _PartitionLists()
    if memo.generation != cache.generation:
        memo.generation = cache.generation
        memo.lists = {}
    parts = memo.lists.get(name)
    if parts is None:
        parts = memo.lists[name] = _build_partition_list(cache, name)
    return parts


def _build_partition_list(cache: MetadataCache, name: str) -> list[dict[str, Any]]:
    parts = []
    for index, s in sorted(cache.partitions(name).items()):
        alive = cache.is_alive(s.leader)
        parts.append(
            {
                "error_code": 0 if alive else int(ErrorCode.LEADER_NOT_AVAILABLE),
                "partition_index": index,
                "leader_id": s.leader if alive else -1,
                "leader_epoch": s.leader_epoch,
                "replica_nodes": list(s.replicas),
                "isr_nodes": list(s.isr),
                "offline_replicas": list(s.offline_replicas),
            }
        )
    return parts


def _topic(cache: MetadataCache, name: str) -> dict[str, Any]:
    return {
        "error_code": 0,
        "name": name,
        "is_internal": name in INTERNAL_TOPICS,
        "partitions": _partition_list(cache, name),
        "topic_authorized_operations": AUTHORIZED_OPS_OMITTED,
    }


def _error_topic(name: str, code: ErrorCode) -> dict[str, Any]:
    return {"error_code": int(code), "name": name, "is_internal": name in INTERNAL_TOPICS, "partitions": []}


async def _create(
    plane: ZooKeeperControlPlane, broker: Broker, name: str, partitions: int, replication_factor: int
) -> ErrorCode:
    """Ask the ClusterAdmin for a topic; the retriable error to answer meanwhile."""
    cluster = plane.admin_or_none
    if cluster is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    configs: dict[str, str] = {}
    if name == OFFSETS_TOPIC:
        configs = {
            "cleanup.policy": "compact",
            "segment.bytes": str(broker.config.group.offsets_topic_segment_bytes),
        }
    try:
        await cluster.create_topics(name, partitions, replication_factor, None, configs, False)
        log.info(
            "asked the controller for topic %s (%d partitions, RF %d)", name, partitions, replication_factor
        )
    except KafkaError as e:
        if e.code is not ErrorCode.TOPIC_ALREADY_EXISTS:
            log.info("creating %s failed: %s", name, e)
            return (
                e.code if e.code is ErrorCode.INVALID_REPLICATION_FACTOR else ErrorCode.LEADER_NOT_AVAILABLE
            )
    return ErrorCode.LEADER_NOT_AVAILABLE


def _brokers(cache: MetadataCache, listener: str) -> list[dict[str, Any]]:
    out = []
    for b in cache.brokers():
        ep = b.endpoint(listener) or b.endpoint()
        if ep is not None:
            out.append({"node_id": b.id, "host": ep.host, "port": ep.port, "rack": b.rack})
    return out


async def metadata(
    ctx: RequestContext, plane: ZooKeeperControlPlane, body: Mapping[str, Any]
) -> dict[str, Any]:
    cache = plane.cache
    await _initialized(cache)
    broker = ctx.broker
    requested = body.get("topics")
    allow_auto = bool(body.get("allow_auto_topic_creation", True)) if ctx.version >= 4 else True
    topics: list[dict[str, Any]] = []
    if requested is None or (ctx.version == 0 and not requested):
        topics = [_topic(cache, name) for name in sorted(cache.topics())]
    else:
        server = broker.config.server
        for entry in requested:
            name = entry.get("name")
            if name is None and ctx.version >= 10:  # a topic by id only
                name = cache.topic_by_id(entry["topic_id"])
                if name is None:
                    topics.append(unknown_topic_id(entry.get("topic_id")))
                    continue
            name = name or ""
            if cache.has_topic(name):
                topics.append(_topic(cache, name))
            elif topic_name_error(name):
                topics.append(_error_topic(name, ErrorCode.INVALID_TOPIC_EXCEPTION))
            elif name == OFFSETS_TOPIC and allow_auto:
                code = await _create_offsets_topic(plane, broker)
                topics.append(_error_topic(name, code))
            elif allow_auto and server.auto_create_topics_enable and name not in INTERNAL_TOPICS:
                code = await _create(
                    plane, broker, name, server.num_partitions, server.default_replication_factor
                )
                topics.append(_error_topic(name, code))
            else:
                topics.append(_error_topic(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
    return {
        "throttle_time_ms": 0,
        "brokers": _brokers(cache, ctx.listener),
        "cluster_id": broker.cluster_id,
        "controller_id": cache.controller_id,
        "topics": topics,
        "cluster_authorized_operations": AUTHORIZED_OPS_OMITTED,
    }


async def _create_offsets_topic(plane: ZooKeeperControlPlane, broker: Broker) -> ErrorCode:
    """Kafka's getOrCreateInternalTopic: while fewer brokers are alive (as this broker's metadata cache
    knows them) than offsets.topic.replication.factor, the topic is not created and the answer is
    COORDINATOR_NOT_AVAILABLE (the client retries); a cache that knows no broker never tries. Said once
    per alive count, not on every client retry."""
    g = broker.config.group
    cache = plane.cache
    rf = g.offsets_topic_replication_factor
    alive = len(cache.brokers())
    if alive < rf:
        if plane.offsets_refused_alive != alive:
            plane.offsets_refused_alive = alive
            log.warning(
                "not creating %s yet: %d alive brokers do not meet offsets.topic.replication.factor %d "
                "(normal while the cluster starts)",
                OFFSETS_TOPIC,
                alive,
                rf,
            )
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    plane.offsets_refused_alive = None
    return await _create(plane, broker, OFFSETS_TOPIC, g.offsets_topic_num_partitions, rf)


async def find_coordinator(ctx: RequestContext, plane: ZooKeeperControlPlane, key: str) -> dict[str, Any]:
    """The leader of the group's __consumer_offsets partition; COORDINATOR_NOT_AVAILABLE until there is one.

    Before the controller's first UpdateMetadata this waits (bounded) and then answers the retriable
    COORDINATOR_NOT_AVAILABLE, as Kafka's KafkaApis does without the offsets topic in its cache, rather
    than closing the connection the way Metadata must (an empty broker list loses librdkafka's brokers)."""
    cache = plane.cache
    if not cache.initialized and not await cache.wait_initialized(CACHE_WAIT_S):
        raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, "no metadata from the controller yet")
    broker = ctx.broker
    if not cache.has_topic(OFFSETS_TOPIC):
        await _create_offsets_topic(plane, broker)
        raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"{OFFSETS_TOPIC} is being created")
    n = len(cache.partitions(OFFSETS_TOPIC))
    state = cache.partition(OFFSETS_TOPIC, partition_for(key, n))
    info = cache.broker(state.leader) if state is not None else None
    ep = (info.endpoint(ctx.listener) or info.endpoint()) if info is not None else None
    if info is None or ep is None:
        raise KafkaError(
            ErrorCode.COORDINATOR_NOT_AVAILABLE, "the coordinator's partition has no live leader"
        )
    return {
        "throttle_time_ms": 0,
        "error_code": 0,
        "error_message": None,
        "node_id": info.id,
        "host": ep.host,
        "port": ep.port,
    }
