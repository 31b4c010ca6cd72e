"""LeaveGroup (13) v0-5: one member (v0-2) or a batch of members with per-member errors (v3+; v5's
reason is not kept)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkad.coordinator.group.ownership import check_coordinator
from kafkad.coordinator.group.service import coordinator_for
from kafkad.network.registry import RequestContext, handler
from kafkad.protocol import ApiKey, ErrorCode, Request


@handler(ApiKey.LEAVE_GROUP, 0, 5)
async def handle(ctx: RequestContext, request: Request) -> Mapping[str, Any]:
    b = request.body
    check_coordinator(ctx.broker, b["group_id"] or "")
    coordinator = coordinator_for(ctx.broker)
    if ctx.version < 3:
        top, per = coordinator.leave_group(b["group_id"] or "", [(b["member_id"] or "", None)])
        error = top if top != ErrorCode.NONE or not per else per[0]
        return {"throttle_time_ms": 0, "error_code": int(error), "members": []}
    asked = [(m["member_id"] or "", m.get("group_instance_id")) for m in b["members"] or []]
    top, per = coordinator.leave_group(b["group_id"] or "", asked)
    members = [
        {"member_id": mid, "group_instance_id": inst, "error_code": int(err)}
        for (mid, inst), err in zip(asked, per, strict=False)
    ]
    return {"throttle_time_ms": 0, "error_code": int(top), "members": members}
