"""DescribeProducers (61) v0: the active producers of partitions this broker leads (Kafka's
Partition.activeProducerState): id, epoch, last sequence and timestamp, coordinator epoch and the first
offset of an ongoing transaction (-1 if none), as `kafka-transactions.sh describe-producers` shows.
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
                    {"partition_index": i, "error_code": int(code), "active_producers": []}
                    for i in t["partition_indexes"]
                ],
            }
            for t in request.body.get("topics") or []
        ],
    }


def _describe(ctx: RequestContext, topic: str, index: int) -> dict[str, Any]:
    replicas = ctx.broker.replicas
    try:
        part = replicas.get_or_raise(topic, index)
        if not part.is_leader:
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        log: Any = part.log
        producers = log.producer_state.producers
    except (KafkaError, OSError) as exc:
        e = replicas.error_for(topic, index, exc)
        return {"partition_index": index, "error_code": int(e.code), "error_message": e.message or None}
    return {
        "partition_index": index,
        "error_code": 0,
        "active_producers": [
            {
                "producer_id": e.producer_id,
                "producer_epoch": e.epoch,
                "last_sequence": e.last_seq,
                "last_timestamp": e.timestamp,
                "coordinator_epoch": e.coordinator_epoch,
                "current_txn_start_offset": e.current_txn_first_offset,
            }
            for e in producers.values()
        ],
    }


@handler(ApiKey.DESCRIBE_PRODUCERS, 0, 0, error_body=_error_body)
async def handle(ctx: RequestContext, request: Request) -> Mapping[str, Any]:
    return {
        "throttle_time_ms": 0,
        "topics": [
            {"name": t["name"], "partitions": [_describe(ctx, t["name"], i) for i in t["partition_indexes"]]}
            for t in request.body.get("topics") or []
        ],
    }
