"""InitProducerId (22) v0-5: idempotent producers get a fresh id (never reused across restarts); v3+'s
producer id/epoch are ignored, as Kafka does without a transactional id (it allocates anew).

Transactional ids would need a transaction coordinator, which kafkad does not have: they are refused
with TRANSACTIONAL_ID_AUTHORIZATION_FAILED, which clients report as a clear, fatal error.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkad.network.registry import RequestContext, handler
from kafkad.protocol import ApiKey, ErrorCode, Request


@handler(ApiKey.INIT_PRODUCER_ID, 0, 5)
async def handle(ctx: RequestContext, request: Request) -> Mapping[str, Any]:
    if request.body.get("transactional_id") is not None:
        return {
            "throttle_time_ms": 0,
            "error_code": int(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
            "producer_id": -1,
            "producer_epoch": -1,
        }
    pid = await ctx.broker.producer_ids.allocate()
    return {"throttle_time_ms": 0, "error_code": 0, "producer_id": pid, "producer_epoch": 0}
