"""StopReplica (5) v0-4: stop following (and with delete, remove) partitions; Kafka's fencing by broker
epoch, controller epoch and (v3) leader epoch. The work is ReplicaManager.stop_replicas."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkad.api.controller_requests import cluster_cache
from kafkad.network.registry import RequestContext, handler
from kafkad.protocol import ApiKey, ErrorCode, Request

ANY_EPOCH = -1


def _partitions(body: Mapping[str, Any]) -> tuple[list[tuple[str, int, int]], list[tuple[str, int, int]]]:
    """(kept, deleted): (topic, partition, leader epoch) of every partition named, by delete flag."""
    keep: list[tuple[str, int, int]] = []
    delete: list[tuple[str, int, int]] = []
    flag = bool(body.get("delete_partitions"))
    for p in body.get("ungrouped_partitions") or ():
        (delete if flag else keep).append((p["topic_name"], p["partition_index"], ANY_EPOCH))
    for t in body.get("topics") or ():
        for i in t["partition_indexes"]:
            (delete if flag else keep).append((t["name"], i, ANY_EPOCH))
    for t in body.get("topic_states") or ():
        for ps in t["partition_states"]:
            entry = (t["topic_name"], ps["partition_index"], ps["leader_epoch"])
            (delete if ps["delete_partition"] else keep).append(entry)
    return keep, delete


@handler(ApiKey.STOP_REPLICA, 0, 4)
async def handle(ctx: RequestContext, request: Request) -> Mapping[str, Any]:
    broker = ctx.broker
    body = request.body
    cluster_cache(broker, body)
    keep, delete = _partitions(body)
    replicas = broker.replicas
    errors: dict[tuple[str, int], ErrorCode] = {}
    epoch = body["controller_epoch"]
    if keep:
        errors.update(replicas.stop_replicas(epoch, keep, delete=False))
    if delete:
        errors.update(replicas.stop_replicas(epoch, delete, delete=True))
    return {
        "error_code": 0,
        "partition_errors": [
            {"topic_name": t, "partition_index": p, "error_code": int(code)}
            for (t, p), code in errors.items()
        ],
    }
