"""ListGroups (16) v0-2: every live group with its protocol type."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkad.daemon.groups.service import coordinator_for
from kafkad.daemon.handlers import RequestContext, handler
from kafkad.protocol import ApiKey, Request


@handler(ApiKey.LIST_GROUPS, 0, 2)
async def handle(ctx: RequestContext, _request: Request) -> Mapping[str, Any]:
    groups = coordinator_for(ctx.broker).list_groups()
    return {
        "throttle_time_ms": 0,
        "error_code": 0,
        "groups": [{"group_id": g.group_id, "protocol_type": g.protocol_type} for g in groups],
    }
