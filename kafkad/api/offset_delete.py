"""OffsetDelete (47) v0: delete a group's committed offsets (kafka-consumer-groups --delete-offsets).

Partitions the cluster does not have answer UNKNOWN_TOPIC_OR_PARTITION (KafkaApis filters them out
against its metadata cache before the coordinator sees the request, so a coordinator holding no replica
of a partition still deletes its offsets); the coordinator decides the rest (groups/group_coordinator.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkad.coordinator.group.service import coordinator_for
from kafkad.network.registry import RequestContext, handler
from kafkad.protocol import ApiKey, ErrorCode, Request


def _error_body(_request: Request, code: ErrorCode) -> Mapping[str, Any]:
    return {"error_code": int(code), "throttle_time_ms": 0, "topics": []}


@handler(ApiKey.OFFSET_DELETE, 0, 0, error_body=_error_body)
async def handle(ctx: RequestContext, request: Request) -> Mapping[str, Any]:
    replicas = ctx.broker.replicas
    body = request.body
    asked = [(t["name"], p["partition_index"]) for t in body["topics"] for p in t["partitions"]]
    known = [tp for tp in asked if replicas.partition_known(tp[0], tp[1])]
    error, results = coordinator_for(ctx.broker).delete_offsets(body["group_id"] or "", known)
    if error is not ErrorCode.NONE:
        return {"error_code": int(error), "throttle_time_ms": 0, "topics": []}
    topics: dict[str, list[dict[str, int]]] = {}
    for tp in asked:
        code = results.get(tp, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        topics.setdefault(tp[0], []).append({"partition_index": tp[1], "error_code": int(code)})
    return {
        "error_code": 0,
        "throttle_time_ms": 0,
        "topics": [{"name": n, "partitions": parts} for n, parts in topics.items()],
    }
