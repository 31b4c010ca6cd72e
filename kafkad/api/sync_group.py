"""SyncGroup (14) v0-5 (v5 answers the group's protocol type and name): followers wait (a future) for the leader's assignment; a Stable group
answers at once with the member's stored assignment. In cluster mode the answer waits until the group's
__consumer_offsets partition has replicated the assignment record (Kafka's storeGroup with acks=-1); if it
does not, the group drops the assignment and rebalances, as Kafka's storeGroup callback does."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from kafkad.coordinator.group import SyncResult
from kafkad.coordinator.group.ownership import check_coordinator, commit_replicated
from kafkad.coordinator.group.service import coordinator_for
from kafkad.network.registry import RequestContext, handler
from kafkad.protocol import ApiKey, ErrorCode, Request


@handler(ApiKey.SYNC_GROUP, 0, 5)
async def handle(ctx: RequestContext, request: Request) -> Mapping[str, Any]:
    b = request.body
    check_coordinator(ctx.broker, b["group_id"] or "")
    fut: asyncio.Future[SyncResult] = asyncio.get_running_loop().create_future()

    def respond(result: SyncResult) -> None:
        if not fut.done():
            fut.set_result(result)

    coordinator = coordinator_for(ctx.broker)
    coordinator.sync_group(
        b["group_id"] or "",
        b["generation_id"],
        b["member_id"] or "",
        b.get("group_instance_id"),
        [(a["member_id"], bytes(a["assignment"] or b"")) for a in b["assignments"] or []],
        respond,
    )
    result = await fut
    own = ctx.broker.group_ownership  # cluster mode: answer once the assignment is replicated
    if own is not None and result.error is ErrorCode.NONE:
        failed = await commit_replicated(
            own, b["group_id"] or "", timed_out=ErrorCode.COORDINATOR_NOT_AVAILABLE
        )
        if failed is not None:
            coordinator.assignment_not_replicated(b["group_id"] or "", b["generation_id"], failed)
            return {"throttle_time_ms": 0, "error_code": int(failed), "assignment": b""}
    return {
        "throttle_time_ms": 0,
        "error_code": int(result.error),
        # v5+: the group's protocol type and name (the request's, if the result lacks them)
        "protocol_type": result.protocol_type or b.get("protocol_type"),
        "protocol_name": result.protocol_name or b.get("protocol_name"),
        "assignment": result.assignment,
    }
