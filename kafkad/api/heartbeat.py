"""Heartbeat (12) v0-4: keeps a member's session alive and tells it when to rejoin."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkad.coordinator.group.ownership import check_coordinator
from kafkad.coordinator.group.service import coordinator_for
from kafkad.network.registry import RequestContext, handler
from kafkad.protocol import ApiKey, Request


@handler(ApiKey.HEARTBEAT, 0, 4)
async def handle(ctx: RequestContext, request: Request) -> Mapping[str, Any]:
    b = request.body
    check_coordinator(ctx.broker, b["group_id"] or "")
    error = coordinator_for(ctx.broker).heartbeat(
        b["group_id"] or "", b["generation_id"], b["member_id"] or "", b.get("group_instance_id")
    )
    return {"throttle_time_ms": 0, "error_code": int(error)}
