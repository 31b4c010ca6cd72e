"""DeleteTopics (20) v0-6: honours delete.topic.enable; files go after file.delete.delay.ms.

v6 names topics in `topics` (name or id, KIP-516) instead of `topic_names`; an id no topic has answers
UNKNOWN_TOPIC_ID. The control plane deletes (standalone: the local logs; ZooKeeper mode: marked in
/admin/delete_topics for the controller, waiting up to timeout_ms)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkad.api.broker import Broker
from kafkad.cluster.control_plane import ZERO_ID
from kafkad.network.registry import RequestContext, handler
from kafkad.protocol import ApiKey, ErrorCode, Request
from kafkad.protocol.topic_names import topic_name_error


def _names(request: Request, broker: Broker | None = None) -> tuple[list[str], list[dict[str, Any]]]:
    """The topic names asked for (ids resolved, v6+), and the answers to ids no topic has."""
    if request.header.api_version < 6:
        return list(request.body["topic_names"]), []
    names, by_id = [], []
    for t in request.body["topics"]:
        name = t["name"]
        if name is None and broker is not None:
            name = broker.control_plane.topic_name(t["topic_id"])
        if name is None:
            code = int(ErrorCode.UNKNOWN_TOPIC_ID)
            by_id.append({"name": None, "topic_id": t["topic_id"], "error_code": code})
        else:
            names.append(name)
    return names, by_id


def _error_body(request: Request, code: ErrorCode) -> Mapping[str, Any]:
    names, by_id = _names(request)
    return {
        "throttle_time_ms": 0,
        "responses": [{"name": n, "error_code": int(code)} for n in names] + by_id,
    }


@handler(ApiKey.DELETE_TOPICS, 0, 6, error_body=_error_body)
async def handle(ctx: RequestContext, request: Request) -> Mapping[str, Any]:
    broker = ctx.broker
    names, by_id = _names(request, broker)
    if not broker.config.server.delete_topic_enable:
        return _error_body(request, ErrorCode.TOPIC_DELETION_DISABLED)
    legal = [n for n in names if not topic_name_error(n)]
    done = iter(
        await broker.control_plane.delete_topics(
            broker, legal, int(request.body.get("timeout_ms", 0)), with_ids=ctx.version >= 6
        )
    )
    out = []
    for name in names:
        code, tid = next(done) if not topic_name_error(name) else (ErrorCode.INVALID_TOPIC_EXCEPTION, ZERO_ID)
        out.append({"name": name, "error_code": int(code), "topic_id": tid})  # topic_id: v6+
    return {"throttle_time_ms": 0, "responses": out + by_id}
