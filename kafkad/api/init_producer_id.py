"""InitProducerId (22) v0-5: idempotent producers get a fresh id (never reused across restarts); v3+'s
producer id/epoch are ignored, as Kafka does without a transactional id (it allocates anew).

With a transactional id the transaction coordinator answers (coordinator/transaction/): the id's producer
id with its epoch bumped, zombies fenced, KIP-360's expected producer id/epoch (v3+) honoured. Before v4
PRODUCER_FENCED is answered as INVALID_PRODUCER_EPOCH, which older clients understand (KafkaApis).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkad.coordinator.transaction.service import coordinator_of
from kafkad.network.registry import RequestContext, handler
from kafkad.protocol import ApiKey, ErrorCode, Request


def _body(code: ErrorCode, producer_id: int = -1, epoch: int = -1) -> dict[str, Any]:
    return {
        "throttle_time_ms": 0,
        "error_code": int(code),
        "producer_id": producer_id,
        "producer_epoch": epoch,
    }


@handler(ApiKey.INIT_PRODUCER_ID, 0, 5)
async def handle(ctx: RequestContext, request: Request) -> Mapping[str, Any]:
    body = request.body
    txn_id = body.get("transactional_id")
    if txn_id is None:
        pid = await ctx.broker.producer_ids.allocate()
        return _body(ErrorCode.NONE, pid, 0)
    producer_id = body.get("producer_id", -1)
    epoch = body.get("producer_epoch", -1)
    if (producer_id == -1) != (epoch == -1):
        return _body(ErrorCode.INVALID_REQUEST)
    result = await coordinator_of(ctx.broker).init_producer_id(
        txn_id, body["transaction_timeout_ms"], None if producer_id == -1 else (producer_id, epoch)
    )
    code = result.error
    if code is ErrorCode.PRODUCER_FENCED and ctx.version < 4:
        code = ErrorCode.INVALID_PRODUCER_EPOCH
    if code is not ErrorCode.NONE:
        return _body(code)
    return _body(code, result.producer_id, result.producer_epoch)
