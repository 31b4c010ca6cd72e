"""OffsetForLeaderEpoch (23) v0-4: the end offset of a leader epoch (consumers validating positions, and
followers finding where to truncate: KIP-101/279; v0 answers no epoch, v0-1 carry no current epoch,
v3 adds the follower's replica_id)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkad.network.registry import RequestContext, handler
from kafkad.protocol import ApiKey, ErrorCode, KafkaError, Request


@handler(ApiKey.OFFSET_FOR_LEADER_EPOCH, 0, 4)
async def handle(ctx: RequestContext, request: Request) -> Mapping[str, Any]:
    replicas = ctx.broker.replicas
    topics = []
    for t in request.body["topics"]:
        parts = []
        for p in t["partitions"]:
            out = {"error_code": 0, "partition": p["partition"], "leader_epoch": -1, "end_offset": -1}
            try:
                part = replicas.get_or_raise(t["topic"], p["partition"])
                if not part.is_leader:
                    raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
                current = p["current_leader_epoch"]
                if current > part.leader_epoch:
                    raise KafkaError(ErrorCode.UNKNOWN_LEADER_EPOCH)
                if 0 <= current < part.leader_epoch:
                    raise KafkaError(ErrorCode.FENCED_LEADER_EPOCH)
                epoch, end = part.log.end_offset_for_epoch(p["leader_epoch"])
                out["leader_epoch"], out["end_offset"] = epoch, end
            except KafkaError as e:
                out["error_code"] = int(e.code)
            parts.append(out)
        topics.append({"topic": t["topic"], "partitions": parts})
    return {"throttle_time_ms": 0, "topics": topics}
