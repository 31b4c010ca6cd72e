"""OffsetFetch (9) v1-5: committed offsets of a group (-1 when none); topics=null (v2+) = all."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkad.daemon.groups.ownership import check_coordinator
from kafkad.daemon.groups.service import coordinator_for
from kafkad.daemon.handlers import RequestContext, handler
from kafkad.protocol import ApiKey, ErrorCode, Request


def _error_body(_request: Request, code: ErrorCode) -> Mapping[str, Any]:
    return {"throttle_time_ms": 0, "topics": [], "error_code": int(code)}


@handler(ApiKey.OFFSET_FETCH, 1, 5, error_body=_error_body)
async def handle(ctx: RequestContext, request: Request) -> Mapping[str, Any]:
    b = request.body
    check_coordinator(ctx.broker, b["group_id"] or "")
    asked = b.get("topics")
    partitions = (
        None if asked is None else [(t["name"], p) for t in asked for p in t["partition_indexes"] or []]
    )
    error, found = coordinator_for(ctx.broker).fetch_offsets(b["group_id"] or "", partitions)
    if error != ErrorCode.NONE and ctx.version < 2:
        # v0-1 have no top-level error: it goes on every partition
        return {
            "topics": [
                {
                    "name": t["name"],
                    "partitions": [
                        {
                            "partition_index": p,
                            "committed_offset": -1,
                            "metadata": "",
                            "error_code": int(error),
                        }
                        for p in t["partition_indexes"] or []
                    ],
                }
                for t in asked or []
            ]
        }
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), value in found.items():
        by_topic.setdefault(topic, []).append(
            {
                "partition_index": partition,
                "committed_offset": value.offset if value else -1,
                "committed_leader_epoch": value.leader_epoch if value else -1,
                "metadata": value.metadata if value else "",
                "error_code": 0,
            }
        )
    return {
        "throttle_time_ms": 0,
        "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
        "error_code": int(error),
    }
