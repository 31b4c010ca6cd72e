"""AddOffsetsToTxn (25) v0-4: the producer will commit a group's offsets in its transaction
(send_offsets_to_transaction): the group's __consumer_offsets partition joins the transaction, so its
marker makes the TxnOffsetCommit offsets visible or drops them. Before v2 PRODUCER_FENCED is answered as
INVALID_PRODUCER_EPOCH (KafkaApis).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkad.coordinator.group.config import OFFSETS_TOPIC
from kafkad.coordinator.group.records import partition_for
from kafkad.coordinator.transaction.service import coordinator_of
from kafkad.network.registry import RequestContext, handler
from kafkad.protocol import ApiKey, ErrorCode, Request


def offsets_partition(ctx: RequestContext, group_id: str) -> int:
    """The group's __consumer_offsets partition (GroupCoordinator.partitionFor), by the count the control
    plane says groups hash over."""
    broker = ctx.broker
    return partition_for(group_id, broker.control_plane.group_partition_count(broker))


@handler(ApiKey.ADD_OFFSETS_TO_TXN, 0, 4)
async def handle(ctx: RequestContext, request: Request) -> Mapping[str, Any]:
    body = request.body
    code = await coordinator_of(ctx.broker).add_partitions(
        body["transactional_id"],
        body["producer_id"],
        body["producer_epoch"],
        [(OFFSETS_TOPIC, offsets_partition(ctx, body["group_id"]))],
    )
    if code is ErrorCode.PRODUCER_FENCED and ctx.version < 2:
        code = ErrorCode.INVALID_PRODUCER_EPOCH
    return {"throttle_time_ms": 0, "error_code": int(code)}
