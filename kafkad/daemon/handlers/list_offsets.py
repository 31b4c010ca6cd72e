"""ListOffsets (2) v1-8: earliest (-2), latest (-1), max timestamp (-3, KIP-734: the offset of the record
holding it, as Kafka 3.8+), earliest local (-4, the log start: kafkad has no tiered storage), or the first
offset at/after a timestamp.

librdkafka sends -3 below v7 too (Kafka answers it at any version), so every version takes it. Answers
never reach past the high watermark, as Kafka's fetchOffsetForTimestamp bounds them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkad.daemon.handlers import RequestContext, handler
from kafkad.protocol import ApiKey, ErrorCode, KafkaError, Request

EARLIEST = -2
LATEST = -1
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4


def _error_body(request: Request, code: ErrorCode) -> Mapping[str, Any]:
    return {
        "throttle_time_ms": 0,
        "topics": [
            {
                "name": t["name"],
                "partitions": [
                    {
                        "partition_index": p["partition_index"],
                        "error_code": int(code),
                        "timestamp": -1,
                        "offset": -1,
                        "leader_epoch": -1,
                    }
                    for p in t["partitions"]
                ],
            }
            for t in request.body.get("topics") or []
        ],
    }


@handler(ApiKey.LIST_OFFSETS, 1, 8, error_body=_error_body)
async def handle(ctx: RequestContext, request: Request) -> Mapping[str, Any]:
    replicas = ctx.broker.replicas
    topics = []
    for t in request.body.get("topics") or []:
        parts = []
        for p in t["partitions"]:
            out: dict[str, Any] = {
                "partition_index": p["partition_index"],
                "error_code": 0,
                "timestamp": -1,
                "offset": -1,
                "leader_epoch": -1,
            }
            try:
                part = replicas.get_or_raise(t["name"], p["partition_index"])
                if not part.is_leader:
                    raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
                out["leader_epoch"] = part.leader_epoch
                ts = p["timestamp"]
                if ts in (EARLIEST, EARLIEST_LOCAL):
                    out["offset"] = part.log_start_offset
                elif ts == LATEST:
                    out["offset"] = part.high_watermark
                elif ts < MAX_TIMESTAMP:
                    raise KafkaError(ErrorCode.INVALID_REQUEST, f"timestamp {ts} is not supported")
                else:  # a timestamp, or MAX_TIMESTAMP
                    found = part.log.offset_for_timestamp(ts)
                    if found is not None and found[1] < part.high_watermark:
                        out["timestamp"], out["offset"] = found
            except (KafkaError, OSError) as exc:  # an I/O error may take the partition offline
                out["error_code"] = int(replicas.error_for(t["name"], p["partition_index"], exc).code)
            parts.append(out)
        topics.append({"name": t["name"], "partitions": parts})
    return {"throttle_time_ms": 0, "topics": topics}
