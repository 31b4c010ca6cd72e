"""OffsetFetch (9) v0-9: committed offsets of a group (-1 when none); topics=null (v2+) = all.

v8+ batch several groups in one request (the admin client's listConsumerGroupOffsets), each answered with
its own error; v9's member id/epoch belong to the KIP-848 protocol kafkad does not run and are not checked.
v0 is served from the group coordinator like v1 (Kafka 3.9 in ZooKeeper mode reads v0 offsets from
ZooKeeper's /consumers, where v0 OffsetCommit wrote them; kafkad keeps both versions in
__consumer_offsets, so a v0 client reads what it committed).
v7+ `require_stable` (what read_committed consumers send, KIP-447): a partition with a transactional offset
commit still pending (its transaction has no marker yet) answers UNSTABLE_OFFSET_COMMIT, offset -1, and
the consumer retries instead of starting from an offset the transaction may still roll back.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkad.coordinator.group.ownership import check_coordinator
from kafkad.coordinator.group.service import coordinator_for
from kafkad.network.registry import RequestContext, handler
from kafkad.protocol import ApiKey, ErrorCode, KafkaError, Request


def _error_body(request: Request, code: ErrorCode) -> Mapping[str, Any]:
    groups = [
        {"group_id": g["group_id"], "topics": [], "error_code": int(code)}
        for g in request.body.get("groups") or []
    ]
    return {"throttle_time_ms": 0, "topics": [], "error_code": int(code), "groups": groups}


def _fetch(
    ctx: RequestContext, group_id: str, asked: list[dict[str, Any]] | None, require_stable: bool = False
) -> tuple[ErrorCode, list[dict[str, Any]]]:
    """One group's (error, topics): its committed offsets, the partitions asked for or all (None)."""
    check_coordinator(ctx.broker, group_id)
    partitions = (
        None if asked is None else [(t["name"], p) for t in asked for p in t["partition_indexes"] or []]
    )
    coordinator = coordinator_for(ctx.broker)
    error, found = coordinator.fetch_offsets(group_id, partitions)
    unstable = coordinator.unstable_partitions(group_id) if require_stable else set()
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), value in found.items():
        if (topic, partition) in unstable:
            value = None
        by_topic.setdefault(topic, []).append(
            {
                "partition_index": partition,
                "committed_offset": value.offset if value else -1,
                "committed_leader_epoch": value.leader_epoch if value else -1,
                "metadata": value.metadata if value else "",
                "error_code": int(ErrorCode.UNSTABLE_OFFSET_COMMIT) if (topic, partition) in unstable else 0,
            }
        )
    return error, [{"name": t, "partitions": ps} for t, ps in by_topic.items()]


def _batched(ctx: RequestContext, request: Request) -> Mapping[str, Any]:
    groups = []
    stable = bool(request.body.get("require_stable"))
    for g in request.body["groups"] or []:
        group_id = g["group_id"] or ""
        try:
            error, topics = _fetch(ctx, group_id, g["topics"], stable)
        except KafkaError as e:  # NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS ...: this group only
            error, topics = e.code, []
        groups.append({"group_id": group_id, "topics": topics, "error_code": int(error)})
    return {"throttle_time_ms": 0, "groups": groups}


@handler(ApiKey.OFFSET_FETCH, 0, 9, error_body=_error_body)
async def handle(ctx: RequestContext, request: Request) -> Mapping[str, Any]:
    if ctx.version >= 8:
        return _batched(ctx, request)
    b = request.body
    asked = b.get("topics")
    error, topics = _fetch(ctx, b["group_id"] or "", asked, bool(b.get("require_stable")))
    if error != ErrorCode.NONE and ctx.version < 2:
        # v0-1 have no top-level error: it goes on every partition
        return {
            "topics": [
                {
                    "name": t["name"],
                    "partitions": [
                        {
                            "partition_index": p,
                            "committed_offset": -1,
                            "metadata": "",
                            "error_code": int(error),
                        }
                        for p in t["partition_indexes"] or []
                    ],
                }
                for t in asked or []
            ]
        }
    return {"throttle_time_ms": 0, "topics": topics, "error_code": int(error)}
