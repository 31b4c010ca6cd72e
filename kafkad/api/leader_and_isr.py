"""LeaderAndIsr (4) v0-7: the controller makes this broker leader or follower of partitions.

Fencing as Kafka's ReplicaManager.becomeLeaderOrFollower: broker epoch (controller_requests.py), controller
epoch (the whole request), leader epoch (per partition); the work is ReplicaManager.apply_leader_and_isr.
Leader endpoints missing from live_leaders are taken from the metadata cache.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from kafkad.api.controller_requests import cluster_cache
from kafkad.network.registry import RequestContext, handler
from kafkad.protocol import ApiKey, ErrorCode, Request


def _states(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    out = list(body.get("ungrouped_partition_states") or ())
    for t in body.get("topic_states") or ():
        for ps in t["partition_states"]:
            ps["topic_name"] = t["topic_name"]
            out.append(ps)
    return out


def _response(
    version: int, body: Mapping[str, Any], errors: Mapping[tuple[str, int], ErrorCode]
) -> dict[str, Any]:
    if version < 5:
        return {
            "error_code": 0,
            "partition_errors": [
                {"topic_name": t, "partition_index": p, "error_code": int(code)}
                for (t, p), code in errors.items()
            ],
        }
    ids = {t["topic_name"]: t.get("topic_id") for t in body.get("topic_states") or ()}
    topics: dict[str, list[dict[str, Any]]] = {}
    for (t, p), code in errors.items():
        topics.setdefault(t, []).append({"partition_index": p, "error_code": int(code)})
    return {
        "error_code": 0,
        "topics": [{"topic_id": ids.get(t), "partition_errors": ps} for t, ps in topics.items()],
    }


@handler(ApiKey.LEADER_AND_ISR, 0, 7)
async def handle(ctx: RequestContext, request: Request) -> Mapping[str, Any]:
    broker = ctx.broker
    body = request.body
    cache = cluster_cache(broker, body)
    live = list(body.get("live_leaders") or ())
    known = {b["broker_id"] for b in live}
    states = _states(body)
    for ps in states:
        leader = ps["leader"]
        if leader not in known and leader != broker.broker_id:
            info = cache.broker(leader)
            ep = info.endpoint() if info is not None else None
            if ep is not None:
                live.append({"broker_id": leader, "host_name": ep.host, "port": ep.port})
                known.add(leader)
    replicas = broker.replicas
    errors = replicas.apply_leader_and_isr(body["controller_id"], body["controller_epoch"], states, live)
    fence = replicas.leader_fence
    if fence is not None:  # the controller has told a fenced broker what it leads now
        fence.on_leader_and_isr(body.get("broker_epoch", -1))
    cache.controller_id = body["controller_id"]
    cache.controller_epoch = max(cache.controller_epoch, body["controller_epoch"])
    for t in body.get("topic_states") or ():  # v2+ (ids from v5): partition.metadata, as Kafka writes it
        tid = t.get("topic_id")
        if tid is not None and tid.int != 0:
            cache.set_topic_id(t["topic_name"], tid)
            replicas.set_topic_id(t["topic_name"], tid)
    if replicas.fetchers is not None:
        task = asyncio.get_running_loop().create_task(replicas.fetchers.shutdown_idle())
        _background.add(task)
        task.add_done_callback(_background.discard)
    return _response(ctx.version, body, errors)


_background: set[asyncio.Task[None]] = set()
