"""CreatePartitions (37) v0-3: grow a topic (never shrink: INVALID_PARTITIONS); validate_only. The control
plane checks (protocol/topic_rules.py) and adds them; in cluster mode the answer waits up to timeout_ms for
the new partitions' leaders, none with timeout_ms <= 0, as Kafka."""

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
    validate_only = bool(request.body.get("validate_only"))
    timeout_ms = int(request.body.get("timeout_ms", 0))
    results = []
    for t in request.body["topics"]:
        name, count = t["name"], t["count"]
        try:
            explicit = [list(a["broker_ids"]) for a in t.get("assignments") or []] or None
            await broker.control_plane.create_partitions(
                broker, name, count, explicit, validate_only, timeout_ms
            )
            results.append({"name": name, "error_code": 0, "error_message": None})
        except KafkaError as e:
            results.append({"name": name, "error_code": int(e.code), "error_message": e.message or None})
    return {"throttle_time_ms": 0, "results": results}
