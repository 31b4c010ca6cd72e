"""ListPartitionReassignments (46) v0: the reassignments in progress (kafka-reassign-partitions --list).

The control plane knows them: standalone nothing is ever being reassigned (always empty); in ZooKeeper mode
the topic znodes' adding/removing replicas.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkad.network.registry import RequestContext, handler
from kafkad.protocol import ApiKey, ErrorCode, Request


def _error_body(_request: Request, code: ErrorCode) -> Mapping[str, Any]:
    return {"throttle_time_ms": 0, "error_code": int(code), "error_message": code.name, "topics": []}


@handler(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, 0, error_body=_error_body)
async def handle(ctx: RequestContext, request: Request) -> Mapping[str, Any]:
    topics = request.body.get("topics")
    by_topic: dict[str, list[dict[str, Any]]] = {}
    asked = None if topics is None else [(t["name"], p) for t in topics for p in t["partition_indexes"]]
    ongoing = await ctx.broker.control_plane.list_reassignments(asked)
    for (topic, partition), (replicas, adding, removing) in sorted(ongoing.items()):
        by_topic.setdefault(topic, []).append(
            {
                "partition_index": partition,
                "replicas": list(replicas),
                "adding_replicas": list(adding),
                "removing_replicas": list(removing),
            }
        )
    return {
        "throttle_time_ms": 0,
        "error_code": 0,
        "error_message": None,
        "topics": [{"name": t, "partitions": parts} for t, parts in by_topic.items()],
    }
