"""EndTxn (26) v0-4: commit or abort the producer's transaction. Answered once PrepareCommit/PrepareAbort is
in __transaction_state; the coordinator then writes the markers (coordinator/transaction/). Before v2
PRODUCER_FENCED is answered as INVALID_PRODUCER_EPOCH (KafkaApis)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkad.coordinator.transaction.service import coordinator_of
from kafkad.network.registry import RequestContext, handler
from kafkad.protocol import ApiKey, ErrorCode, Request


@handler(ApiKey.END_TXN, 0, 4)
async def handle(ctx: RequestContext, request: Request) -> Mapping[str, Any]:
    body = request.body
    code = await coordinator_of(ctx.broker).end_txn(
        body["transactional_id"], body["producer_id"], body["producer_epoch"], bool(body["committed"])
    )
    if code is ErrorCode.PRODUCER_FENCED and ctx.version < 2:
        code = ErrorCode.INVALID_PRODUCER_EPOCH
    return {"throttle_time_ms": 0, "error_code": int(code)}
