"""AlterPartitionReassignments (45) v0: move partitions to other replicas (kafka-reassign-partitions).

The control plane moves them. Standalone the only broker holds every partition: a target of exactly this
broker is already in place (NONE, as Kafka answers a reassignment to the current replicas), any other broker
id or an empty or duplicated list is INVALID_REPLICA_ASSIGNMENT, a cancellation (null replicas) finds nothing
to cancel (NO_REASSIGNMENT_IN_PROGRESS), an unknown partition is UNKNOWN_TOPIC_OR_PARTITION. In ZooKeeper
mode it is the controller's work; a KafkaError it raises becomes the top-level error.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkad.network.registry import RequestContext, handler
from kafkad.protocol import ApiKey, ErrorCode, Request

TopicPartition = tuple[str, int]


def _error_body(_request: Request, code: ErrorCode) -> Mapping[str, Any]:
    return {"throttle_time_ms": 0, "error_code": int(code), "error_message": code.name, "responses": []}


@handler(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, 0, error_body=_error_body)
async def handle(ctx: RequestContext, request: Request) -> Mapping[str, Any]:
    asked: dict[TopicPartition, list[int] | None] = {
        (t["name"], p["partition_index"]): p["replicas"]
        for t in request.body["topics"]
        for p in t["partitions"]
    }
    results = await ctx.broker.control_plane.alter_reassignments(ctx.broker, asked)
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), (code, message) in results.items():
        by_topic.setdefault(topic, []).append(
            {
                "partition_index": partition,
                "error_code": int(code),
                "error_message": (message or code.name) if code else None,
            }
        )
    return {
        "throttle_time_ms": 0,
        "error_code": 0,
        "error_message": None,
        "responses": [{"name": t, "partitions": parts} for t, parts in by_topic.items()],
    }
