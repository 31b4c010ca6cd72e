"""AlterPartitionReassignments (45) v0: move partitions to other replicas (kafka-reassign-partitions).

Standalone the only broker holds every partition: a target of exactly this broker is already in place
(NONE, as Kafka answers a reassignment to the current replicas), any other broker id or an empty or
duplicated list is INVALID_REPLICA_ASSIGNMENT, a cancellation (null replicas) finds nothing to cancel
(NO_REASSIGNMENT_IN_PROGRESS), an unknown partition is UNKNOWN_TOPIC_OR_PARTITION.

Cluster mode delegates to `broker.services["cluster"].alter_reassignments`; a KafkaError it raises becomes
the top-level error.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkad.network.registry import RequestContext, handler
from kafkad.protocol import ApiKey, ErrorCode, KafkaError, Request

TopicPartition = tuple[str, int]


def _error_body(_request: Request, code: ErrorCode) -> Mapping[str, Any]:
    return {"throttle_time_ms": 0, "error_code": int(code), "error_message": code.name, "responses": []}


def _standalone(ctx: RequestContext, tp: TopicPartition, target: list[int] | None) -> tuple[ErrorCode, str]:
    if ctx.broker.replicas.get(tp[0], tp[1]) is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The partition {tp[0]}-{tp[1]} does not exist."
    if target is None:
        return ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, f"No reassignment in progress for {tp[0]}-{tp[1]}."
    me = ctx.broker.broker_id
    if not target or len(set(target)) != len(target):
        return ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"Invalid replica assignment {target}."
    if set(target) != {me}:
        return (
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            f"Replica assignment {target} has brokers that are not alive (this standalone broker is {me}).",
        )
    return ErrorCode.NONE, ""


@handler(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, 0, error_body=_error_body)
async def handle(ctx: RequestContext, request: Request) -> Mapping[str, Any]:
    asked: dict[TopicPartition, list[int] | None] = {
        (t["name"], p["partition_index"]): p["replicas"]
        for t in request.body["topics"]
        for p in t["partitions"]
    }
    cluster = ctx.broker.services.get("cluster")
    if cluster is not None and not hasattr(cluster, "alter_reassignments"):
        raise KafkaError(
            ErrorCode.INVALID_REQUEST, "partition reassignment is not available in cluster mode yet"
        )
    if cluster is not None:
        codes = await cluster.alter_reassignments(asked)
        results = {tp: (codes.get(tp, ErrorCode.NONE), "") for tp in asked}
    else:
        results = {tp: _standalone(ctx, tp, target) for tp, target in asked.items()}
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
