"""DeleteRecords (21) v0-2: move a partition's log start offset forward (-1 = up to the high watermark).

Only the leader deletes; other brokers answer NOT_LEADER_OR_FOLLOWER for a partition the cluster has, so
a client sent there by stale metadata refreshes it and goes to the leader (Kafka's answer). Whether the
cluster has it comes from the control plane's metadata image: before it is known (a cluster broker before
the controller's first UpdateMetadata) the answer waits for it (bounded, as Metadata does) instead of
calling every partition led elsewhere unknown, and if it does not come such partitions get the retriable
NOT_LEADER_OR_FOLLOWER.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkad.network.registry import RequestContext, handler
from kafkad.protocol import ApiKey, ErrorCode, KafkaError, Request


def _error_body(request: Request, code: ErrorCode) -> Mapping[str, Any]:
    return {
        "throttle_time_ms": 0,
        "topics": [
            {
                "name": t["name"],
                "partitions": [
                    {"partition_index": p["partition_index"], "low_watermark": -1, "error_code": int(code)}
                    for p in t["partitions"]
                ],
            }
            for t in request.body["topics"]
        ],
    }


@handler(ApiKey.DELETE_RECORDS, 0, 2, error_body=_error_body)
async def handle(ctx: RequestContext, request: Request) -> Mapping[str, Any]:
    replicas = ctx.broker.replicas
    plane = ctx.broker.control_plane
    if not plane.image_ready:
        led_here = all(
            (p := replicas.get(t["name"], q["partition_index"])) is not None and p.is_leader
            for t in request.body["topics"]
            for q in t["partitions"]
        )
        if not led_here:
            await plane.wait_image()
    topics = []
    for t in request.body["topics"]:
        parts = []
        for p in t["partitions"]:
            out = {"partition_index": p["partition_index"], "low_watermark": -1, "error_code": 0}
            try:
                part = replicas.get_or_raise(t["name"], p["partition_index"])
                if not part.is_leader:
                    raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
                offset = p["offset"]
                if offset == -1:
                    offset = part.high_watermark
                if offset < 0 or offset > part.high_watermark:
                    raise KafkaError(
                        ErrorCode.OFFSET_OUT_OF_RANGE, f"offset {offset} beyond the high watermark"
                    )
                out["low_watermark"] = part.log.delete_records(offset)
            except (KafkaError, OSError) as exc:  # an I/O error may take the partition offline
                code = replicas.error_for(t["name"], p["partition_index"], exc).code
                if code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and not plane.image_ready:
                    code = ErrorCode.NOT_LEADER_OR_FOLLOWER  # unknown to an empty cache: ask elsewhere
                out["error_code"] = int(code)
            parts.append(out)
        topics.append({"name": t["name"], "partitions": parts})
    return {"throttle_time_ms": 0, "topics": topics}
