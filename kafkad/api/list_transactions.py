"""ListTransactions (66) v0-1 (KIP-664, KIP-994's duration filter in v1): the transactional ids this broker
coordinates, filtered by state names, producer ids and (v1) a minimum running time. State names Kafka does
not know come back in `unknown_state_filters`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkad.coordinator.transaction.service import coordinator_of
from kafkad.coordinator.transaction.state import TxnState
from kafkad.network.registry import RequestContext, handler
from kafkad.protocol import ApiKey, ErrorCode, Request


def _error_body(_request: Request, code: ErrorCode) -> Mapping[str, Any]:
    return {
        "throttle_time_ms": 0,
        "error_code": int(code),
        "unknown_state_filters": [],
        "transaction_states": [],
    }


@handler(ApiKey.LIST_TRANSACTIONS, 0, 1, error_body=_error_body)
async def handle(ctx: RequestContext, request: Request) -> Mapping[str, Any]:
    body = request.body
    coordinator = coordinator_of(ctx.broker)
    states: list[TxnState] = []
    unknown: list[str] = []
    for name in body.get("state_filters") or ():
        state = TxnState.from_kafka_name(name)
        if state is None:
            unknown.append(name)
        else:
            states.append(state)
    if unknown and not states:
        listed = []  # only unknown states asked for: none can match
    else:
        listed = coordinator.list_transactions(
            states, list(body.get("producer_id_filters") or ()), body.get("duration_filter", -1)
        )
    return {
        "throttle_time_ms": 0,
        "error_code": 0,
        "unknown_state_filters": unknown,
        "transaction_states": [
            {"transactional_id": t, "producer_id": pid, "transaction_state": s.kafka_name}
            for t, pid, s in listed
        ],
    }
