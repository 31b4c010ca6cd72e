"""JoinGroup (11) v0-9: parked in the coordinator until the rebalance completes (a future, never
blocking the loop). v0 has no rebalance timeout (the session timeout serves), v4+ gets the
MEMBER_ID_REQUIRED round trip for dynamic members, v5 carries group.instance.id, v7+ answers the
protocol type, v8's reason is not kept, v9's skip_assignment stays false (no KIP-814 server-side
assignors). In cluster mode a static member's rejoin that rewrote the group record is answered once that
record is replicated; if it is not, the member's old id is restored and the join fails, as Kafka's
updateStaticMemberAndRebalance."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from kafkad.coordinator.group import JoinRequest, JoinResult, Protocol
from kafkad.coordinator.group.ownership import check_coordinator, commit_replicated
from kafkad.coordinator.group.service import ready_coordinator
from kafkad.network.registry import RequestContext, handler
from kafkad.protocol import ApiKey, ErrorCode, Request


def _error_body(request: Request, code: ErrorCode) -> Mapping[str, Any]:
    return _body(JoinResult(code, request.body.get("member_id") or ""))


def _body(result: JoinResult) -> dict[str, Any]:
    return {
        "throttle_time_ms": 0,
        "error_code": int(result.error),
        "generation_id": result.generation_id,
        "protocol_name": result.protocol_name or "",
        "leader": result.leader,
        "member_id": result.member_id,
        "members": [
            {"member_id": m.member_id, "group_instance_id": m.group_instance_id, "metadata": m.metadata}
            for m in result.members
        ],
    }


def client_host(peer: str) -> str:
    """Kafka reports the member's address as "/<ip>" (Java's InetAddress.toString)."""
    host = peer.rsplit(":", 1)[0] if ":" in peer else peer
    return "/" + host.strip("[]")


@handler(ApiKey.JOIN_GROUP, 0, 9, error_body=_error_body)
async def handle(ctx: RequestContext, request: Request) -> Mapping[str, Any]:
    b = request.body
    session = b["session_timeout_ms"]
    rebalance = b.get("rebalance_timeout_ms", -1)
    instance = b.get("group_instance_id")
    req = JoinRequest(
        group_id=b["group_id"] or "",
        member_id=b["member_id"] or "",
        group_instance_id=instance,
        client_id=ctx.header.client_id or "",
        client_host=client_host(ctx.peer),
        session_timeout_ms=session,
        rebalance_timeout_ms=rebalance if ctx.version >= 1 and rebalance >= 0 else session,
        protocol_type=b["protocol_type"] or "",
        protocols=tuple(Protocol(p["name"], bytes(p["metadata"] or b"")) for p in b["protocols"]),
        require_known_member_id=ctx.version >= 4 and instance is None,
    )
    check_coordinator(ctx.broker, req.group_id)
    coordinator = await ready_coordinator(ctx.broker)  # the first join may create the offsets topic
    fut: asyncio.Future[JoinResult] = asyncio.get_running_loop().create_future()

    def respond(result: JoinResult) -> None:
        if not fut.done():
            fut.set_result(result)

    coordinator.join_group(req, respond)
    result = await fut
    own = ctx.broker.group_ownership
    if own is not None and result.replaced is not None and result.error is ErrorCode.NONE:
        failed = await commit_replicated(own, req.group_id, timed_out=ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if failed is not None:
            result = coordinator.static_member_not_replicated(
                req.group_id, result.member_id, result.replaced, failed
            )
    body = _body(result)
    body["protocol_type"] = req.protocol_type  # v7+: the group's, which a joined member's matches
    return body
