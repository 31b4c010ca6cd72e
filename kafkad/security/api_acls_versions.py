"""Authorization of the request forms newer API versions added (issue 23), beside api_acls.py's checks:
topics named by id (Fetch v13+, Metadata v10+, DeleteTopics v6: each id is authorized as the topic it
names; an id no topic has goes through, for the handler's UNKNOWN_TOPIC_ID, as Kafka does), batched
groups (OffsetFetch v8+: each group DESCRIBE, each topic DESCRIBE, per group) and batched coordinator
keys (FindCoordinator v4+: each key as v0-3 checks the one key)."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from kafkad.network.registry import Handler, RequestContext
from kafkad.protocol import ErrorCode, Request
from kafkad.security.acl import Operation, ResourceType
from kafkad.security.authz import allowed

Body = Mapping[str, Any] | None
_TOPIC_DENIED = int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
_GROUP_DENIED = int(ErrorCode.GROUP_AUTHORIZATION_FAILED)


def _with(request: Request, **changes: Any) -> Request:
    return Request(request.header, {**request.body, **changes})


def topic_name(ctx: RequestContext, tid: uuid.UUID) -> str | None:
    """The topic with id `tid`, from the control plane of the broker the context carries (security may not
    import the cluster room)."""
    name: str | None = ctx.broker.control_plane.topic_name(tid)
    return name


def names_from_ids(ctx: RequestContext, request: Request, list_key: str, name_key: str) -> Request:
    """The request with each topic's name filled in from its id (None where no topic has the id)."""
    topics = [{**t, name_key: topic_name(ctx, t["topic_id"])} for t in request.body.get(list_key) or ()]
    return _with(request, **{list_key: topics})


def fetch_by_id(named: Handler) -> Handler:
    """Fetch v13+: authorize by the names the ids resolve to, then the v12- checks (`named`)."""

    async def h(ctx: RequestContext, request: Request) -> Body:
        if ctx.version >= 13:
            request = names_from_ids(ctx, request, "topics", "topic")
        return await named(ctx, request)

    return h


def delete_topics_v6(ctx: RequestContext, request: Request, fn: Handler) -> Awaitable[Body]:
    """DeleteTopics v6: `topics` by name or id, each needing DELETE on the topic."""

    async def run() -> Body:
        ok, denied = [], []
        for t in request.body.get("topics") or ():
            name = t["name"] if t["name"] is not None else topic_name(ctx, t["topic_id"])
            if name is None or allowed(ctx, Operation.DELETE, ResourceType.TOPIC, name):
                ok.append(t)
            else:
                denied.append({"name": name, "topic_id": t["topic_id"], "error_code": _TOPIC_DENIED})
        resp = await fn(ctx, _with(request, topics=ok)) if denied else await fn(ctx, request)
        if resp is None or not denied:
            return resp
        return {**resp, "responses": list(resp.get("responses") or ()) + denied}

    return run()


def offset_fetch_groups(ctx: RequestContext, request: Request, fn: Handler) -> Awaitable[Body]:
    """OffsetFetch v8+: a group the principal may not DESCRIBE answers GROUP_AUTHORIZATION_FAILED alone;
    in the others, topics it may not DESCRIBE answer TOPIC_AUTHORIZATION_FAILED (all topics: filtered)."""

    def topic_ok(name: str) -> bool:
        return allowed(ctx, Operation.DESCRIBE, ResourceType.TOPIC, name)

    async def run() -> Body:
        ok_groups, denied_groups = [], []
        denied_topics: dict[str, list[dict[str, Any]]] = {}
        for g in request.body.get("groups") or ():
            if not allowed(ctx, Operation.DESCRIBE, ResourceType.GROUP, g["group_id"]):
                denied_groups.append({"group_id": g["group_id"], "topics": [], "error_code": _GROUP_DENIED})
                continue
            topics = g["topics"]
            if topics is not None:
                denied_topics[g["group_id"]] = [
                    {
                        "name": t["name"],
                        "partitions": [
                            {"partition_index": p, "committed_offset": -1, "error_code": _TOPIC_DENIED}
                            for p in t["partition_indexes"]
                        ],
                    }
                    for t in topics
                    if not topic_ok(t["name"])
                ]
                g = {**g, "topics": [t for t in topics if topic_ok(t["name"])]}
            ok_groups.append(g)
        resp = await fn(ctx, _with(request, groups=ok_groups))
        if resp is None:
            return None
        groups = []
        for g in resp.get("groups") or ():
            kept = [t for t in g.get("topics") or () if topic_ok(t["name"])]
            groups.append({**g, "topics": kept + denied_topics.get(g["group_id"], [])})
        return {**resp, "groups": groups + denied_groups}

    return run()


def find_coordinator_keys(
    ctx: RequestContext, request: Request, fn: Handler, key_allowed: Callable[[str], ErrorCode | None]
) -> Awaitable[Body]:
    """FindCoordinator v4+: each key checked as v0-3 check their one key (`key_allowed`: the error or None)."""

    async def run() -> Body:
        ok, denied = [], []
        for key in request.body.get("coordinator_keys") or ():
            code = key_allowed(key)
            if code is None:
                ok.append(key)
            else:
                denied.append(
                    {"key": key, "node_id": -1, "host": "", "port": -1, "error_code": int(code),
                     "error_message": code.name}
                )  # fmt: skip
        resp = await fn(ctx, _with(request, coordinator_keys=ok)) if denied else await fn(ctx, request)
        if resp is None or not denied:
            return resp
        return {**resp, "coordinators": list(resp.get("coordinators") or ()) + denied}

    return run()
