"""DescribeTransactions (65) v0 (KIP-664): the state of transactional ids this broker coordinates
(`kafka-transactions --describe`); another broker's ids answer NOT_COORDINATOR, unknown ones
TRANSACTIONAL_ID_NOT_FOUND."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkad.coordinator.transaction.coordinator import TxnDescription
from kafkad.coordinator.transaction.service import coordinator_of
from kafkad.network.registry import RequestContext, handler
from kafkad.protocol import ApiKey, ErrorCode, KafkaError, Request


def _entry(txn_id: str, found: TxnDescription | ErrorCode) -> dict[str, Any]:
    if isinstance(found, ErrorCode):
        return {
            "error_code": int(found),
            "transactional_id": txn_id,
            "transaction_state": "",
            "transaction_timeout_ms": 0,
            "transaction_start_time_ms": -1,
            "producer_id": -1,
            "producer_epoch": -1,
            "topics": [],
        }
    by_topic: dict[str, list[int]] = {}
    for topic, index in sorted(found.partitions):
        by_topic.setdefault(topic, []).append(index)
    return {
        "error_code": 0,
        "transactional_id": txn_id,
        "transaction_state": found.state.kafka_name,
        "transaction_timeout_ms": found.timeout_ms,
        "transaction_start_time_ms": found.start_ms,
        "producer_id": found.producer_id,
        "producer_epoch": found.producer_epoch,
        "topics": [{"topic": t, "partitions": ps} for t, ps in by_topic.items()],
    }


def _error_body(request: Request, code: ErrorCode) -> Mapping[str, Any]:
    ids = request.body.get("transactional_ids") or []
    return {"throttle_time_ms": 0, "transaction_states": [_entry(t, code) for t in ids]}


@handler(ApiKey.DESCRIBE_TRANSACTIONS, 0, 0, error_body=_error_body)
async def handle(ctx: RequestContext, request: Request) -> Mapping[str, Any]:
    try:
        coordinator = coordinator_of(ctx.broker)
    except KafkaError as e:
        return _error_body(request, e.code)
    ids = request.body.get("transactional_ids") or []
    return {"throttle_time_ms": 0, "transaction_states": [_entry(t, coordinator.describe(t)) for t in ids]}
