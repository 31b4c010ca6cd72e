"""UpdateMetadata (6) v0-8: the controller's view of live brokers and partition states, into the
metadata cache (Kafka's maybeUpdateMetadataCache), fenced by broker epoch and controller epoch."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from kafkad.api.controller_requests import cluster_cache
from kafkad.network.registry import RequestContext, handler
from kafkad.protocol import ApiKey, ErrorCode, KafkaError, Request
from kafkad.replication.metadata_cache import PartitionState, broker_from_wire, partition_state_from_wire


def _partitions(body: Mapping[str, Any]) -> Iterator[tuple[str, int, PartitionState]]:
    for ps in body.get("ungrouped_partition_states") or ():
        yield ps["topic_name"], ps["partition_index"], partition_state_from_wire(ps)
    for t in body.get("topic_states") or ():
        for ps in t["partition_states"]:
            yield t["topic_name"], ps["partition_index"], partition_state_from_wire(ps)


@handler(ApiKey.UPDATE_METADATA, 0, 8)
async def handle(ctx: RequestContext, request: Request) -> Mapping[str, Any]:
    broker = ctx.broker
    body = request.body
    cache = cluster_cache(broker, body)
    replicas = broker.replicas
    epoch = body["controller_epoch"]
    if epoch < replicas.controller_epoch:
        raise KafkaError(
            ErrorCode.STALE_CONTROLLER_EPOCH, f"controller epoch {epoch} < {replicas.controller_epoch}"
        )
    replicas.controller_epoch = epoch
    brokers = [broker_from_wire(b) for b in body.get("live_brokers") or ()]
    cache.update(body["controller_id"], epoch, brokers, _partitions(body))
    for t in body.get("topic_states") or ():  # v7+: topic ids
        cache.set_topic_id(t["topic_name"], t["topic_id"])
    return {"error_code": 0}
