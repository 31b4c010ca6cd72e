"""CreateTopics (19) v0-7: validate_only (v1+), configs, num_partitions/replication_factor -1 = broker defaults.
v5+ answer the partition count and replication factor (standalone; -1 in cluster mode, where the
controller creates the topic after the answer) and no configs; v7+ the new topic's id (standalone; the zero
id in cluster mode). The request's checks are protocol/topic_rules.py's; the control plane creates."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Mapping
from typing import Any

from kafkad.api.broker import Broker
from kafkad.cluster.control_plane import ZERO_ID
from kafkad.network.registry import RequestContext, handler
from kafkad.protocol import ApiKey, ErrorCode, KafkaError, Request
from kafkad.protocol.topic_rules import check_new_topic


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
    body = request.body
    names = Counter(t["name"] for t in body["topics"])
    topics = await asyncio.gather(
        *(_create(ctx.broker, ctx.version, t, names, body["validate_only"]) for t in body["topics"])
    )
    return {"throttle_time_ms": 0, "topics": list(topics)}


async def _create(
    broker: Broker, version: int, t: Mapping[str, Any], names: Counter[str], validate_only: bool
) -> dict[str, Any]:
    name = t["name"]
    try:
        if names[name] > 1:
            raise KafkaError(
                ErrorCode.INVALID_REQUEST,
                f"Create topics request from client contains {name} more than once.",
            )
        assignments = t.get("assignments") or []
        check_new_topic(name, t["num_partitions"], t["replication_factor"], bool(assignments))
        configs = _configs(t)
        explicit = {a["partition_index"]: list(a["broker_ids"]) for a in assignments} or None
        created = await broker.control_plane.create_topic(
            broker, name, t["num_partitions"], t["replication_factor"], explicit, configs, validate_only
        )
        return {
            "name": name,
            "error_code": 0,
            "error_message": None,
            # v7+: the new topic's id; v5+: its partition count and replication factor
            "topic_id": created.topic_id if version >= 7 else ZERO_ID,
            "num_partitions": created.num_partitions,
            "replication_factor": created.replication_factor,
        }
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
