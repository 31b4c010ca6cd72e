"""Metadata (3) v0-12: brokers, cluster id, controller, topics with partitions; auto-creates topics.

Topic ids (v10+, KIP-516) come from cluster/topic_ids.py; a topic asked for by an id no topic has (v10+,
null name) answers UNKNOWN_TOPIC_ID.

Authorized operations (v8) are the full sets when asked for (no authorizer), INT32_MIN otherwise.

__consumer_offsets is created on demand by the group coordinator (groups/service.py): it is not
listed while half made, and a request naming it creates it like Kafka does for internal topics
(whatever auto.create.topics.enable says, if the request allows auto-creation).
In cluster mode the answer comes from the metadata cache (cluster_metadata.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkad.api.broker import Broker
from kafkad.cluster import metadata as cluster_metadata
from kafkad.cluster import topic_ids
from kafkad.coordinator.group.config import OFFSETS_TOPIC
from kafkad.coordinator.group.service import hidden_topics, ready_coordinator
from kafkad.network.registry import RequestContext, handler
from kafkad.protocol import ApiKey, ErrorCode, KafkaError, Request
from kafkad.protocol.topic_names import INTERNAL_TOPICS, topic_name_error
from kafkad.security.authorized_operations import cluster_operations, topic_operations


def _topic(broker: Broker, name: str, operations: int) -> dict[str, Any]:
    parts = broker.replicas.partitions_of(name)
    partitions: list[dict[str, Any]] = [
        {
            "error_code": 0 if p.leader_id is not None else int(ErrorCode.LEADER_NOT_AVAILABLE),
            "partition_index": p.index,
            "leader_id": p.leader_id if p.leader_id is not None else -1,
            "leader_epoch": p.leader_epoch,
            "replica_nodes": list(p.replicas),
            "isr_nodes": list(p.isr),
            "offline_replicas": [],
        }
        for p in parts
    ]
    offline = broker.replicas.offline_of(name)
    if offline:  # files that failed (storage/log_offline.py): Kafka's offline partition, no leader
        me = [broker.broker_id]
        partitions += [
            {
                "error_code": int(ErrorCode.LEADER_NOT_AVAILABLE),
                "partition_index": off.partition,
                "leader_id": -1,
                "leader_epoch": 0,
                "replica_nodes": me,
                "isr_nodes": me,
                "offline_replicas": me,
            }
            for off in offline
        ]
        partitions.sort(key=lambda p: p["partition_index"])
    return {
        "error_code": 0,
        "name": name,
        "is_internal": name in INTERNAL_TOPICS,
        "partitions": partitions,
        "topic_authorized_operations": operations,
    }


def _error_topic(name: str, code: ErrorCode) -> dict[str, Any]:
    return {"error_code": int(code), "name": name, "is_internal": False, "partitions": []}


def _add_topic_ids(broker: Broker, topics: list[dict[str, Any]]) -> None:
    """v10+: each found topic's id (KIP-516)."""
    for t in topics:
        if t.get("name") is not None and t["error_code"] in (0, ErrorCode.LEADER_NOT_AVAILABLE):
            t["topic_id"] = topic_ids.topic_id(broker, t["name"])


@handler(ApiKey.METADATA, 0, 12)
async def handle(ctx: RequestContext, request: Request) -> Mapping[str, Any]:
    broker = ctx.broker
    body = request.body
    cache = broker.services.get("metadata_cache")
    if cache is not None:  # cluster mode: the controller's view (once per request)
        answer = await cluster_metadata.metadata(ctx, cache, body)
        if body.get("include_topic_authorized_operations"):
            for t in answer["topics"]:
                if "partitions" in t and not t["error_code"]:
                    t["topic_authorized_operations"] = topic_operations(True)
        answer["cluster_authorized_operations"] = cluster_operations(
            bool(body.get("include_cluster_authorized_operations"))
        )
        if ctx.version >= 10:
            _add_topic_ids(broker, answer["topics"])
        return answer
    requested = body.get("topics")
    ops = topic_operations(bool(body.get("include_topic_authorized_operations")))
    allow_auto = bool(body.get("allow_auto_topic_creation", True)) if ctx.version >= 4 else True
    topics: list[dict[str, Any]] = []
    hidden = hidden_topics(broker)
    if requested is None or (ctx.version == 0 and not requested):
        topics = [
            _topic(broker, name, ops) for name in sorted(broker.replicas.topics()) if name not in hidden
        ]
    else:
        for entry in requested:
            name = entry.get("name")
            if name is None and ctx.version >= 10:  # v10+: a topic by id only
                name = topic_ids.topic_name(broker, entry["topic_id"])
                if name is None or name in hidden:
                    topics.append(cluster_metadata.unknown_topic_id(entry.get("topic_id")))
                    continue
            name = name or ""
            if name == OFFSETS_TOPIC and allow_auto:
                try:
                    await ready_coordinator(broker)
                except KafkaError:
                    topics.append(_error_topic(name, ErrorCode.LEADER_NOT_AVAILABLE))  # retriable
                    continue
            elif name in hidden:
                topics.append(_error_topic(name, ErrorCode.LEADER_NOT_AVAILABLE))
                continue
            if broker.replicas.has_topic(name):
                topics.append(_topic(broker, name, ops))
                continue
            if topic_name_error(name):
                topics.append(_error_topic(name, ErrorCode.INVALID_TOPIC_EXCEPTION))
                continue
            try:
                created = broker.maybe_auto_create(name, allow_auto)
            except KafkaError as e:
                topics.append(_error_topic(name, e.code))
                continue
            topics.append(
                _topic(broker, name, ops)
                if created
                else _error_topic(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            )
    if ctx.version >= 10:
        _add_topic_ids(broker, topics)
    host, port = broker.advertised_host_port(ctx.listener if ctx.session is not None else None)
    return {
        "throttle_time_ms": 0,
        "brokers": [
            {"node_id": broker.broker_id, "host": host, "port": port, "rack": broker.config.server.rack}
        ],
        "cluster_id": broker.cluster_id,
        "controller_id": broker.broker_id,
        "topics": topics,
        "cluster_authorized_operations": cluster_operations(
            bool(body.get("include_cluster_authorized_operations"))
        ),
    }
