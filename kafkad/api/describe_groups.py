"""DescribeGroups (15) v0-5: state, protocol and members (with metadata and assignment once Stable);
authorized operations (v3+) are the full set when asked for (no authorizer)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkad.coordinator.group.group import GroupState, GroupSummary
from kafkad.coordinator.group.ownership import group_error
from kafkad.coordinator.group.service import coordinator_for
from kafkad.network.registry import RequestContext, handler
from kafkad.protocol import ApiKey, Request
from kafkad.security.authorized_operations import group_operations


@handler(ApiKey.DESCRIBE_GROUPS, 0, 5)
async def handle(ctx: RequestContext, request: Request) -> Mapping[str, Any]:
    coordinator = coordinator_for(ctx.broker)
    operations = group_operations(bool(request.body.get("include_authorized_operations")))
    groups = []
    for group_id in request.body["groups"] or []:
        error, s = coordinator.describe_group(group_id or "")
        elsewhere = group_error(ctx.broker, group_id or "")
        if elsewhere is not None:  # cluster mode: coordinated by another broker
            error, s = elsewhere, GroupSummary(group_id or "", GroupState.DEAD, "", "", ())
        groups.append(
            {
                "error_code": int(error),
                "group_id": s.group_id,
                "group_state": s.state.value,
                "protocol_type": s.protocol_type,
                "protocol_data": s.protocol_data,
                "members": [
                    {
                        "member_id": m.member_id,
                        "group_instance_id": m.group_instance_id,
                        "client_id": m.client_id,
                        "client_host": m.client_host,
                        "member_metadata": m.metadata,
                        "member_assignment": m.assignment,
                    }
                    for m in s.members
                ],
                "authorized_operations": operations,
            }
        )
    return {"throttle_time_ms": 0, "groups": groups}
