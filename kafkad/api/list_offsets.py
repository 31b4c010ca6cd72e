"""ListOffsets (2) v0-9: earliest (-2), latest (-1), max timestamp (-3, KIP-734: the offset of the record
holding it, as Kafka 3.8+), earliest local (-4, the log start: kafkad has no tiered storage), latest tiered
(-5: -1, nothing is tiered), or the first offset at/after a timestamp.

v0 (sarama's kafka-version < 0.10.1, Burrow) answers Kafka's legacy `old_style_offsets`: up to
max_num_offsets segment boundaries at or before the timestamp, newest first (UnifiedLog's
legacyFetchOffsetsBefore), the log end capped at the high watermark for consumers. Kafka dates a segment by
its file's mtime; kafkad uses its largest record timestamp (no stat on the event loop).

librdkafka sends -3 below v7 too (Kafka answers it at any version), so every version takes it. Answers
never reach past the high watermark, as Kafka's fetchOffsetForTimestamp bounds them; latest for a
read_committed client (isolation_level 1, v2+) is the last stable offset.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkad.network.registry import RequestContext, handler
from kafkad.protocol import ApiKey, ErrorCode, KafkaError, Request

EARLIEST = -2
LATEST = -1
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5
READ_COMMITTED = 1


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


def _legacy_offsets(part: Any, ts: int, max_num: int, consumer: bool, now_ms: int) -> list[int]:
    """Kafka's legacyFetchOffsetsBefore (ListOffsets v0): segment bases and the log end, newest first."""
    log = part.log
    segments = list(log.segments)
    start = part.log_start_offset
    points = [(max(s.base_offset, start), s.max_timestamp) for s in segments]
    if segments[-1].size > 0:
        points.append((log.log_end_offset, now_ms))
    if ts == LATEST:
        idx = len(points) - 1
    elif ts == EARLIEST:
        idx = 0
    else:
        idx = len(points) - 1
        while idx >= 0 and points[idx][1] > ts:
            idx -= 1
    offsets = sorted((points[j][0] for j in range(idx, idx - min(max_num, idx + 1), -1)), reverse=True)
    hw = part.high_watermark
    if consumer and any(o > hw for o in offsets):
        offsets = [hw] + [o for o in offsets if o <= hw]
    return offsets


def _handle_v0(ctx: RequestContext, request: Request) -> Mapping[str, Any]:
    replicas = ctx.broker.replicas
    consumer = request.body.get("replica_id", -1) == -1
    now_ms = ctx.broker.clock.time_ms()
    topics = []
    for t in request.body.get("topics") or []:
        parts = []
        for p in t["partitions"]:
            out: dict[str, Any] = {"partition_index": p["partition_index"], "error_code": 0}
            ts = p["timestamp"]
            try:
                if ts < EARLIEST:  # v0 knows only -1 and -2 among the negative timestamps
                    raise KafkaError(ErrorCode.UNSUPPORTED_VERSION)
                part = replicas.get_or_raise(t["name"], p["partition_index"])
                if not part.is_leader:
                    raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
                out["old_style_offsets"] = _legacy_offsets(part, ts, p["max_num_offsets"], consumer, now_ms)
            except (KafkaError, OSError) as exc:
                if isinstance(exc, KafkaError) and exc.code is ErrorCode.UNSUPPORTED_VERSION:
                    out["error_code"] = int(exc.code)
                else:
                    out["error_code"] = int(replicas.error_for(t["name"], p["partition_index"], exc).code)
            parts.append(out)
        topics.append({"name": t["name"], "partitions": parts})
    return {"topics": topics}


@handler(ApiKey.LIST_OFFSETS, 0, 9, error_body=_error_body)
async def handle(ctx: RequestContext, request: Request) -> Mapping[str, Any]:
    if ctx.version == 0:
        return _handle_v0(ctx, request)
    replicas = ctx.broker.replicas
    committed = request.body.get("isolation_level", 0) == READ_COMMITTED
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
                # read_committed (v2+) sees up to the last stable offset (Kafka's lastFetchableOffset)
                fetchable = part.last_stable_offset if committed else part.high_watermark
                if ts in (EARLIEST, EARLIEST_LOCAL):
                    out["offset"] = part.log_start_offset
                elif ts == LATEST:
                    out["offset"] = fetchable
                elif ts == LATEST_TIERED:
                    pass  # nothing is tiered: Kafka answers -1 without remote storage
                elif ts < MAX_TIMESTAMP:
                    raise KafkaError(ErrorCode.INVALID_REQUEST, f"timestamp {ts} is not supported")
                else:  # a timestamp, or MAX_TIMESTAMP
                    found = part.log.offset_for_timestamp(ts)
                    if found is not None and found[1] < fetchable:
                        out["timestamp"], out["offset"] = found
            except (KafkaError, OSError) as exc:  # an I/O error may take the partition offline
                out["error_code"] = int(replicas.error_for(t["name"], p["partition_index"], exc).code)
            parts.append(out)
        topics.append({"name": t["name"], "partitions": parts})
    return {"throttle_time_ms": 0, "topics": topics}
