"""CreateTopics (19) v0-7: validate_only (v1+), configs, num_partitions/replication_factor -1 = broker defaults.
v5+ answer the partition count and replication factor (standalone; -1 in cluster mode, where the
controller creates the topic after the answer) and no configs; v7+ the new topic's id (standalone; the zero
id in cluster mode)."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Mapping
from typing import Any

from kafkad.cluster import topic_ids
from kafkad.network.registry import RequestContext, handler
from kafkad.protocol import ApiKey, ErrorCode, KafkaError, Request
from kafkad.protocol.topic_names import topic_name_error


def _error_body(request: Request, code: ErrorCode) -> Mapping[str, Any]:
    return {
        "throttle_time_ms": 0,
        "topics": [
            {"name": t["name"], "error_code": int(code), "error_message": None}
            for t in request.body["topics"]
        ],
    }


@handler(ApiKey.CREATE_TOPICS, 0, 7, error_body=_error_body)
async def handle(ctx: RequestContext, request: Request) -> Mapping[str, Any]:
    broker = ctx.broker
    body = request.body
    names = Counter(t["name"] for t in body["topics"])
    cluster = broker.services.get("cluster")
    if cluster is not None:
        topics = await asyncio.gather(
            *(_create_in_cluster(cluster, t, names, body["validate_only"]) for t in body["topics"])
        )
        return {"throttle_time_ms": 0, "topics": list(topics)}
    results = []
    for t in body["topics"]:
        name = t["name"]
        try:
            if names[name] > 1:
                raise KafkaError(
                    ErrorCode.INVALID_REQUEST,
                    f"Create topics request from client contains {name} more than once.",
                )
            num_partitions = t["num_partitions"]
            replication_factor = t["replication_factor"]
            assignments = t.get("assignments") or []
            if assignments:
                if num_partitions != -1 or replication_factor != -1:
                    raise KafkaError(
                        ErrorCode.INVALID_REQUEST,
                        "Both numPartitions or replicationFactor and replicasAssignments were set.",
                    )
                for a in assignments:
                    if list(a["broker_ids"]) != [broker.broker_id]:
                        raise KafkaError(
                            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                            f"assignment {a['broker_ids']} names unknown brokers",
                        )
                num_partitions, replication_factor = len(assignments), 1
            configs = _configs(t)
            broker.create_topic(
                name, num_partitions, replication_factor, configs, validate_only=body["validate_only"]
            )
            created = not body["validate_only"]
            results.append(
                {
                    "name": name,
                    "error_code": 0,
                    "error_message": None,
                    # v7+: the new topic's id; v5+: its partition count and replication factor
                    "topic_id": broker.replicas.topic_id(name)
                    if created and ctx.version >= 7
                    else topic_ids.ZERO,
                    "num_partitions": num_partitions
                    if num_partitions != -1
                    else broker.config.server.num_partitions,
                    "replication_factor": 1,
                }
            )
        except KafkaError as e:
            results.append({"name": name, "error_code": int(e.code), "error_message": e.message or None})
    return {"throttle_time_ms": 0, "topics": results}


async def _create_in_cluster(
    cluster: Any, t: Mapping[str, Any], names: Counter[str], validate_only: bool
) -> dict[str, Any]:
    """Cluster mode: the assignment is written to ZooKeeper; the controller elects the leaders."""
    name = t["name"]
    try:
        if names[name] > 1:
            raise KafkaError(
                ErrorCode.INVALID_REQUEST,
                f"Create topics request from client contains {name} more than once.",
            )
        err = topic_name_error(name)
        if err:
            raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, err)
        assignments = t.get("assignments") or []
        if assignments and (t["num_partitions"] != -1 or t["replication_factor"] != -1):
            raise KafkaError(
                ErrorCode.INVALID_REQUEST,
                "Both numPartitions or replicationFactor and replicasAssignments were set.",
            )
        configs = _configs(t)
        explicit = {a["partition_index"]: list(a["broker_ids"]) for a in assignments} or None
        await cluster.create_topics(
            name, t["num_partitions"], t["replication_factor"], explicit, configs, validate_only
        )
        return {"name": name, "error_code": 0, "error_message": None}
    except KafkaError as e:
        return {"name": name, "error_code": int(e.code), "error_message": e.message or None}


def _configs(t: Mapping[str, Any]) -> dict[str, str]:
    configs: dict[str, str] = {}
    for c in t.get("configs") or []:
        if c["value"] is None:
            raise KafkaError(
                ErrorCode.INVALID_CONFIG, f"Null value not supported for topic configs: {c['name']}"
            )
        configs[c["name"]] = c["value"]
    return configs
