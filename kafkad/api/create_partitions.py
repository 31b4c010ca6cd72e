"""CreatePartitions (37) v0-3: grow a topic (never shrink: INVALID_PARTITIONS); validate_only. In cluster mode
the answer waits up to timeout_ms for the new partitions' leaders, none with timeout_ms <= 0, as Kafka."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkad.network.registry import RequestContext, handler
from kafkad.protocol import ApiKey, ErrorCode, KafkaError, Request


def _error_body(request: Request, code: ErrorCode) -> Mapping[str, Any]:
    return {
        "throttle_time_ms": 0,
        "results": [
            {"name": t["name"], "error_code": int(code), "error_message": None}
            for t in request.body["topics"]
        ],
    }


@handler(ApiKey.CREATE_PARTITIONS, 0, 3, error_body=_error_body)
async def handle(ctx: RequestContext, request: Request) -> Mapping[str, Any]:
    broker = ctx.broker
    cluster = broker.services.get("cluster")
    results = []
    for t in request.body["topics"]:
        name, count = t["name"], t["count"]
        try:
            if cluster is not None:
                explicit = [list(a["broker_ids"]) for a in t.get("assignments") or []] or None
                await cluster.create_partitions(
                    name, count, explicit, request.body["validate_only"], request.body["timeout_ms"]
                )
                results.append({"name": name, "error_code": 0, "error_message": None})
                continue
            current = broker.replicas.topics().get(name, 0)  # offline partitions count too
            if current == 0:
                raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
            if count < current:
                raise KafkaError(
                    ErrorCode.INVALID_PARTITIONS,
                    f"Topic currently has {current} partitions, which is higher than the requested {count}.",
                )
            if count == current:
                raise KafkaError(ErrorCode.INVALID_PARTITIONS, f"Topic already has {current} partitions.")
            assignments = t.get("assignments") or []
            if assignments:
                if len(assignments) != count - current:
                    raise KafkaError(
                        ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                        f"Increasing the number of partitions by {count - current} but {len(assignments)} assignments provided.",
                    )
                if any(list(a["broker_ids"]) != [broker.broker_id] for a in assignments):
                    raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "assignments name unknown brokers")
            if not request.body["validate_only"]:
                broker.replicas.add_partitions(name, count)
            results.append({"name": name, "error_code": 0, "error_message": None})
        except KafkaError as e:
            results.append({"name": name, "error_code": int(e.code), "error_message": e.message or None})
    return {"throttle_time_ms": 0, "results": results}
