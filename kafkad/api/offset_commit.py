"""OffsetCommit (8) v0-9: generation/member checked, "simple" commits (generation -1, no member) for
assign() consumers; persisted to __consumer_offsets before the answer (created by the first commit if no
client looked up the coordinator before). v0 carries no generation or member (a simple commit; Kafka 3.9
in ZooKeeper mode keeps v0 commits in ZooKeeper, kafkad in __consumer_offsets, where OffsetFetch v0
reads them); v1's commit timestamp and v2-4's retention time are ignored, as Kafka does since KIP-211."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from kafkad.coordinator.group import GroupCoordinator, OffsetCommit
from kafkad.coordinator.group.group_coordinator import PendingCommit
from kafkad.coordinator.group.ownership import GroupOwnership, check_coordinator, commit_replicated
from kafkad.coordinator.group.service import coordinator_if_ready, ready_coordinator
from kafkad.network.registry import RequestContext, handler
from kafkad.protocol import ApiKey, ErrorCode, Request

# Cluster mode: commits waiting for their partition's ISR. The wait and the apply run in their own task,
# so a commit whose client disconnects (the handler is cancelled) is still served once replicated, as
# the record in the log is (Kafka's append callback runs whoever waits).
_REPLICATING: set[asyncio.Task[ErrorCode | None]] = set()


async def _replicate_then_apply(
    own: GroupOwnership,
    coordinator: GroupCoordinator,
    group_id: str,
    pending: PendingCommit,
) -> ErrorCode | None:
    replicated = False
    try:
        failed = await commit_replicated(own, group_id)
        replicated = failed is None
        return failed
    finally:
        coordinator.apply_commit(group_id, pending, replicated)


def _error_body(request: Request, code: ErrorCode) -> Mapping[str, Any]:
    return {
        "throttle_time_ms": 0,
        "topics": [
            {
                "name": t["name"],
                "partitions": [
                    {"partition_index": p["partition_index"], "error_code": int(code)}
                    for p in t["partitions"]
                ],
            }
            for t in request.body.get("topics") or []
        ],
    }


@handler(ApiKey.OFFSET_COMMIT, 0, 9, error_body=_error_body)
async def handle(ctx: RequestContext, request: Request) -> Mapping[str, Any]:
    b = request.body
    check_coordinator(ctx.broker, b["group_id"] or "")
    coordinator = coordinator_if_ready(ctx.broker) or await ready_coordinator(ctx.broker)
    topics = b["topics"] or []
    offsets: dict[tuple[str, int], OffsetCommit] = {}
    for t in topics:
        name = t["name"]
        for p in t["partitions"]:
            offsets[(name, p["partition_index"])] = OffsetCommit(
                p["committed_offset"],
                p.get("committed_leader_epoch", -1),
                p.get("committed_metadata"),
            )
    own = ctx.broker.group_ownership  # cluster mode: answer once the offsets are replicated
    group_id = b["group_id"] or ""
    pending = None if own is None else PendingCommit()
    results = coordinator.commit_offsets(
        group_id,
        b["generation_id_or_member_epoch"],
        b["member_id"] or "",
        b.get("group_instance_id"),
        offsets,
        pending=pending,
    )
    if own is not None and pending is not None and pending.offsets:
        task = asyncio.ensure_future(_replicate_then_apply(own, coordinator, group_id, pending))
        _REPLICATING.add(task)
        task.add_done_callback(_REPLICATING.discard)
        failed = await asyncio.shield(task)
        if failed is not None:
            results = {tp: failed if code is ErrorCode.NONE else code for tp, code in results.items()}
    return {
        "throttle_time_ms": 0,
        "topics": [
            {
                "name": t["name"],
                "partitions": [
                    {
                        "partition_index": p["partition_index"],
                        "error_code": int(results[(t["name"], p["partition_index"])]),
                    }
                    for p in t["partitions"]
                ],
            }
            for t in topics
        ],
    }
