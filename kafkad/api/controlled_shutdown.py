"""ControlledShutdown (7) v0-3: a broker about to stop asks the controller to move its leaderships away.

Answered by the control plane: the active controller in ZooKeeper mode (others: NOT_CONTROLLER, as
Kafka). The response lists the partitions the broker still leads (the broker retries until none remain).
Standalone there is no controller to ask, so NOT_CONTROLLER.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkad.network.registry import RequestContext, handler
from kafkad.protocol import ApiKey, KafkaError, Request


@handler(ApiKey.CONTROLLED_SHUTDOWN, 0, 3)
async def handle(ctx: RequestContext, request: Request) -> Mapping[str, Any]:
    try:
        remaining = await ctx.broker.control_plane.controlled_shutdown(
            request.body["broker_id"], request.body.get("broker_epoch", -1)
        )
    except KafkaError as e:
        return {"error_code": int(e.code), "remaining_partitions": []}
    return {
        "error_code": 0,
        "remaining_partitions": [{"topic_name": t, "partition_index": p} for t, p in sorted(remaining)],
    }
