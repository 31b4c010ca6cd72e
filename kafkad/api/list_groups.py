"""ListGroups (16) v0-5: every live group with its protocol type; v4+ its state and a states filter,
v5+ its type ("classic": kafkad has no KIP-848 groups) and a types filter. Filters match case-insensitively
(as Kafka's group coordinator does); an empty filter matches everything."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkad.coordinator.group.service import coordinator_for
from kafkad.network.registry import RequestContext, handler
from kafkad.protocol import ApiKey, Request

GROUP_TYPE = "classic"


@handler(ApiKey.LIST_GROUPS, 0, 5)
async def handle(ctx: RequestContext, request: Request) -> Mapping[str, Any]:
    states = {s.lower() for s in request.body.get("states_filter") or ()}
    types = {t.lower() for t in request.body.get("types_filter") or ()}
    if types and GROUP_TYPE not in types:
        return {"throttle_time_ms": 0, "error_code": 0, "groups": []}
    groups = coordinator_for(ctx.broker).list_groups()
    return {
        "throttle_time_ms": 0,
        "error_code": 0,
        "groups": [
            {
                "group_id": g.group_id,
                "protocol_type": g.protocol_type,
                "group_state": g.state.value,
                "group_type": GROUP_TYPE,
            }
            for g in groups
            if not states or g.state.value.lower() in states
        ],
    }
