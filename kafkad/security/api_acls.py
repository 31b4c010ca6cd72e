"""Per-API authorization, as Kafka's KafkaApis checks it, wrapped around the handlers.

Only a broker with an authorizer uses this: `authorizing_registry` copies the handler registry with each
API's handler wrapped by its check; without an authorizer the handlers run bare (no cost per request).
A wrapper either refuses the whole request (raising KafkaError: the handler's error body carries
CLUSTER/GROUP_AUTHORIZATION_FAILED), or removes the topics (groups, resources) the principal may not touch
from the request, runs the handler on the rest and adds an error entry (TOPIC_AUTHORIZATION_FAILED, ...)
for each removed one to the response, or filters what the response lists (Metadata, ListGroups).

Operations (Kafka's): Produce WRITE topic; Fetch READ topic (CLUSTER_ACTION for followers); DescribeCluster none; ListOffsets,
Metadata, OffsetForLeaderEpoch DESCRIBE topic; OffsetCommit READ group + READ topic; OffsetFetch
DESCRIBE group + DESCRIBE topic; FindCoordinator DESCRIBE group; Join/Sync/Heartbeat/LeaveGroup READ
group; DescribeGroups DESCRIBE group; ListGroups DESCRIBE cluster or per group; DeleteGroups DELETE group;
CreateTopics CREATE cluster or topic; DeleteTopics, DeleteRecords DELETE topic; CreatePartitions ALTER
topic; DescribeConfigs DESCRIBE_CONFIGS, AlterConfigs ALTER_CONFIGS on the topic or the cluster;
InitProducerId IDEMPOTENT_WRITE on the cluster or WRITE on some topic; inter-broker APIs CLUSTER_ACTION.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from kafkad.network.registry import Handler, HandlerRegistry, HandlerSpec, RequestContext
from kafkad.protocol import ErrorCode, KafkaError, Request
from kafkad.security import api_acls_txn, api_acls_versions
from kafkad.security.acl import (
    CLUSTER_NAME,
    CLUSTER_OPERATIONS,
    GROUP_OPERATIONS,
    TOPIC_OPERATIONS,
    Operation,
    ResourceType,
)
from kafkad.security.authz import allowed, host, principal, require_cluster, require_group

Body = Mapping[str, Any]
_TOPIC_DENIED = int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
_GROUP_DENIED = int(ErrorCode.GROUP_AUTHORIZATION_FAILED)
_CLUSTER_DENIED = int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
_T, _G, _C = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER


def _with(request: Request, **changes: Any) -> Request:
    return Request(request.header, {**request.body, **changes})


def _split(items: Iterable[Any], ok: Callable[[Any], bool]) -> tuple[list[Any], list[Any]]:
    yes: list[Any] = []
    no: list[Any] = []
    for it in items or ():
        (yes if ok(it) else no).append(it)
    return yes, no


def _extend(resp: Body | None, key: str, extra: list[Any]) -> Body | None:
    if resp is None or not extra:
        return resp
    out = dict(resp)
    out[key] = list(out.get(key) or ()) + extra
    return out


async def _topics_filtered(
    fn: Handler,
    ctx: RequestContext,
    request: Request,
    op: Operation,
    req_key: str,
    name_key: str,
    resp_key: str,
    error_entry: Callable[[Any], Any],
) -> Body | None:
    """Run `fn` on the topics `op` is allowed on; the others answer with `error_entry(item)`."""
    ok, denied = _split(
        request.body.get(req_key) or (),
        # None: a topic id no topic has (Fetch v13+), left to the handler's UNKNOWN_TOPIC_ID
        lambda t: t[name_key] is None or allowed(ctx, op, _T, t[name_key]),
    )
    if not denied:
        return await fn(ctx, request)
    resp = await fn(ctx, _with(request, **{req_key: ok}))
    return _extend(resp, resp_key, [error_entry(t) for t in denied])


def _partitions(field: str, index_key: str, out_index: str, **extra: Any) -> Callable[[Any], list[Any]]:
    def entries(t: Any) -> list[Any]:
        return [{out_index: p[index_key], "error_code": _TOPIC_DENIED, **extra} for p in t[field]]

    return entries


_BYPASS: Body = {}  # a `pre` hook's answer: the request is allowed whole (e.g. a follower with CLUSTER_ACTION)
Pre = Callable[[RequestContext, Request, Callable[[Any], list[Any]]], Body | None]


def _per_topic(
    op: Operation,
    *,
    name_key: str = "name",
    req_key: str = "topics",
    resp_key: str = "topics",
    req_parts: str = "partitions",
    resp_parts: str = "partitions",
    idx_in: str = "partition_index",
    idx_out: str = "partition_index",
    pre: Pre | None = None,
    **extra: Any,
) -> Callable[[Handler], Handler]:
    """A wrapper for an API addressed by topic and partition: the topics `op` is not allowed on answer
    TOPIC_AUTHORIZATION_FAILED per partition. `pre` may refuse (raise), answer (a body) or allow whole."""
    parts = _partitions(req_parts, idx_in, idx_out, **extra)

    def entry(t: Any) -> Any:
        e = {name_key: t[name_key], resp_parts: parts(t)}
        if "topic_id" in t:  # Fetch v13+ answers by id
            e["topic_id"] = t["topic_id"]
        return e

    def wrap(fn: Handler) -> Handler:
        async def h(ctx: RequestContext, request: Request) -> Body | None:
            if pre is not None:
                early = pre(ctx, request, parts)
                if early is _BYPASS:
                    return await fn(ctx, request)
                if early is not None:
                    return early
            return await _topics_filtered(fn, ctx, request, op, req_key, name_key, resp_key, entry)

        return h

    return wrap


def _produce_pre(ctx: RequestContext, request: Request, _parts: Any) -> Body | None:
    tid = request.body.get("transactional_id")
    if tid and not allowed(ctx, Operation.WRITE, ResourceType.TRANSACTIONAL_ID, tid):
        raise KafkaError(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, tid)
    return None


def _fetch_pre(ctx: RequestContext, request: Request, parts: Callable[[Any], list[Any]]) -> Body | None:
    """A follower's fetch needs CLUSTER_ACTION; without it every partition is TOPIC_AUTHORIZATION_FAILED."""
    if request.body.get("replica_id", -1) < 0:
        return None
    if allowed(ctx, Operation.CLUSTER_ACTION, _C, CLUSTER_NAME):
        return _BYPASS
    topics = request.body.get("topics") or ()
    return {
        "error_code": 0,
        "session_id": 0,
        "responses": [
            {"topic": t["topic"], "topic_id": t["topic_id"], "partitions": parts(t)} for t in topics
        ],
    }


def _leader_epoch_pre(ctx: RequestContext, request: Request, _parts: Any) -> Body | None:
    if request.body.get("replica_id", -1) < 0:
        return None
    require_cluster(ctx, Operation.CLUSTER_ACTION)
    return _BYPASS


def _offset_commit_pre(ctx: RequestContext, request: Request, _parts: Any) -> Body | None:
    require_group(ctx, Operation.READ, request.body["group_id"])
    return None


_wrap_produce = _per_topic(
    Operation.WRITE, req_key="topic_data", resp_key="responses", req_parts="partition_data",
    resp_parts="partition_responses", idx_in="index", idx_out="index", pre=_produce_pre, base_offset=-1,
)  # fmt: skip
_wrap_fetch = _per_topic(
    Operation.READ, name_key="topic", resp_key="responses", idx_in="partition", pre=_fetch_pre,
    high_watermark=-1, records=None,
)  # fmt: skip
_wrap_list_offsets = _per_topic(Operation.DESCRIBE, offset=-1, timestamp=-1)
_wrap_leader_epoch = _per_topic(
    Operation.DESCRIBE, name_key="topic", idx_in="partition", idx_out="partition", pre=_leader_epoch_pre,
    leader_epoch=-1, end_offset=-1,
)  # fmt: skip
_wrap_delete_records = _per_topic(Operation.DELETE, low_watermark=-1)
_wrap_offset_commit = _per_topic(Operation.READ, pre=_offset_commit_pre)


def _offset_delete_pre(ctx: RequestContext, request: Request, _parts: Any) -> Body | None:
    require_group(ctx, Operation.DELETE, request.body["group_id"])
    return None


_wrap_offset_delete = _per_topic(Operation.READ, pre=_offset_delete_pre)


def _wrap_cluster(op: Operation) -> Callable[[Handler], Handler]:
    """APIs on the cluster as a whole (ElectLeaders, reassignments, DescribeCluster, inter-broker)."""

    def wrap(fn: Handler) -> Handler:
        async def h(ctx: RequestContext, request: Request) -> Body | None:
            require_cluster(ctx, op)
            return await fn(ctx, request)

        return h

    return wrap


def _ops(ctx: RequestContext, ops: tuple[Operation, ...], rtype: ResourceType, name: str) -> int:
    """Kafka's authorized-operations bitfield: the operations of `ops` this principal may perform."""
    return sum(1 << op for op in ops if allowed(ctx, op, rtype, name))


def _wrap_describe_cluster(fn: Handler) -> Handler:
    """DescribeCluster is open to every principal on a broker (Kafka checks nothing but the authorized
    operations it reports when asked: those the principal is allowed on the cluster)."""

    async def h(ctx: RequestContext, request: Request) -> Body | None:
        resp = await fn(ctx, request)
        if resp is None or not request.body.get("include_cluster_authorized_operations"):
            return resp
        out = dict(resp)
        out["cluster_authorized_operations"] = _ops(ctx, CLUSTER_OPERATIONS, _C, CLUSTER_NAME)
        return out

    return h


def _wrap_offset_fetch(fn: Handler) -> Handler:
    async def h(ctx: RequestContext, request: Request) -> Body | None:
        if ctx.version >= 8:
            return await api_acls_versions.offset_fetch_groups(ctx, request, fn)
        require_group(ctx, Operation.DESCRIBE, request.body["group_id"])
        topics = request.body.get("topics")
        if topics is None:  # every committed offset: list only the describable topics
            resp = await fn(ctx, request)
            if resp is None:
                return None
            out = dict(resp)
            out["topics"] = [
                t for t in resp.get("topics") or () if allowed(ctx, Operation.DESCRIBE, _T, t["name"])
            ]
            return out

        def entry(t: Any) -> Any:
            return {
                "name": t["name"],
                "partitions": [
                    {"partition_index": p, "committed_offset": -1, "error_code": _TOPIC_DENIED}
                    for p in t["partition_indexes"]
                ],
            }

        return await _topics_filtered(fn, ctx, request, Operation.DESCRIBE, "topics", "name", "topics", entry)

    return h


def _wrap_group(op: Operation) -> Callable[[Handler], Handler]:
    def wrap(fn: Handler) -> Handler:
        async def h(ctx: RequestContext, request: Request) -> Body | None:
            require_group(ctx, op, request.body["group_id"])
            return await fn(ctx, request)

        return h

    return wrap


def _wrap_find_coordinator(fn: Handler) -> Handler:
    async def h(ctx: RequestContext, request: Request) -> Body | None:
        key_type = request.body.get("key_type", 0)
        if ctx.version >= 4:

            def key_error(key: str) -> ErrorCode | None:
                if key_type == 0 and not allowed(ctx, Operation.DESCRIBE, _G, key):
                    return ErrorCode.GROUP_AUTHORIZATION_FAILED
                if key_type == 1 and not allowed(ctx, Operation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key):
                    return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
                return None

            return await api_acls_versions.find_coordinator_keys(ctx, request, fn, key_error)
        if key_type == 0:
            require_group(ctx, Operation.DESCRIBE, request.body["key"])
        elif key_type == 1 and not allowed(
            ctx, Operation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, request.body["key"]
        ):
            raise KafkaError(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, request.body["key"])
        return await fn(ctx, request)

    return h


def _wrap_describe_groups(fn: Handler) -> Handler:
    async def h(ctx: RequestContext, request: Request) -> Body | None:
        ok, denied = _split(
            request.body.get("groups") or (), lambda g: allowed(ctx, Operation.DESCRIBE, _G, g)
        )
        resp = await fn(ctx, _with(request, groups=ok)) if denied else await fn(ctx, request)
        if resp is not None and request.body.get("include_authorized_operations"):
            resp = dict(resp)
            resp["groups"] = [
                {**g, "authorized_operations": _ops(ctx, GROUP_OPERATIONS, _G, g["group_id"])}
                for g in resp.get("groups") or ()
            ]
        return _extend(
            resp, "groups", [{"group_id": g, "error_code": _GROUP_DENIED, "members": []} for g in denied]
        )

    return h


def _wrap_list_groups(fn: Handler) -> Handler:
    async def h(ctx: RequestContext, request: Request) -> Body | None:
        resp = await fn(ctx, request)
        if resp is None or allowed(ctx, Operation.DESCRIBE, _C, CLUSTER_NAME):
            return resp
        out = dict(resp)
        out["groups"] = [
            g for g in resp.get("groups") or () if allowed(ctx, Operation.DESCRIBE, _G, g["group_id"])
        ]
        return out

    return h


def _wrap_delete_groups(fn: Handler) -> Handler:
    async def h(ctx: RequestContext, request: Request) -> Body | None:
        ok, denied = _split(
            request.body.get("groups_names") or (), lambda g: allowed(ctx, Operation.DELETE, _G, g)
        )
        resp = await fn(ctx, _with(request, groups_names=ok)) if denied else await fn(ctx, request)
        return _extend(resp, "results", [{"group_id": g, "error_code": _GROUP_DENIED} for g in denied])

    return h


def _wrap_create_topics(fn: Handler) -> Handler:
    async def h(ctx: RequestContext, request: Request) -> Body | None:
        if allowed(ctx, Operation.CREATE, _C, CLUSTER_NAME):
            return await fn(ctx, request)
        return await _topics_filtered(
            fn, ctx, request, Operation.CREATE, "topics", "name", "topics",
            lambda t: {"name": t["name"], "error_code": _TOPIC_DENIED, "error_message": "Authorization failed."},
        )  # fmt: skip

    return h


def _wrap_delete_topics(fn: Handler) -> Handler:
    async def h(ctx: RequestContext, request: Request) -> Body | None:
        if ctx.version >= 6:
            return await api_acls_versions.delete_topics_v6(ctx, request, fn)
        names = request.body.get("topic_names") or ()
        ok, denied = _split(names, lambda n: allowed(ctx, Operation.DELETE, _T, n))
        resp = await fn(ctx, _with(request, topic_names=ok)) if denied else await fn(ctx, request)
        return _extend(resp, "responses", [{"name": n, "error_code": _TOPIC_DENIED} for n in denied])

    return h


def _wrap_create_partitions(fn: Handler) -> Handler:
    async def h(ctx: RequestContext, request: Request) -> Body | None:
        return await _topics_filtered(
            fn, ctx, request, Operation.ALTER, "topics", "name", "results",
            lambda t: {"name": t["name"], "error_code": _TOPIC_DENIED, "error_message": "Authorization failed."},
        )  # fmt: skip

    return h


def _resource_allowed(ctx: RequestContext, op: Operation, r: Any) -> bool:
    rtype = int(r["resource_type"])
    if rtype == 2:  # TOPIC
        return allowed(ctx, op, _T, r["resource_name"])
    return allowed(ctx, op, _C, CLUSTER_NAME)  # BROKER (4) and broker loggers (8): the cluster


def _resource_error(r: Any) -> dict[str, Any]:
    code = _TOPIC_DENIED if int(r["resource_type"]) == 2 else _CLUSTER_DENIED
    return {
        "error_code": code,
        "error_message": "Authorization failed.",
        "resource_type": r["resource_type"],
        "resource_name": r["resource_name"],
        "configs": [],
    }


def _wrap_configs(op: Operation, resp_key: str) -> Callable[[Handler], Handler]:
    def wrap(fn: Handler) -> Handler:
        async def h(ctx: RequestContext, request: Request) -> Body | None:
            ok, denied = _split(request.body.get("resources") or (), lambda r: _resource_allowed(ctx, op, r))
            resp = await fn(ctx, _with(request, resources=ok)) if denied else await fn(ctx, request)
            return _extend(resp, resp_key, [_resource_error(r) for r in denied])

        return h

    return wrap


def _wrap_init_producer_id(fn: Handler) -> Handler:
    async def h(ctx: RequestContext, request: Request) -> Body | None:
        tid = request.body.get("transactional_id")
        if tid:
            if not allowed(ctx, Operation.WRITE, ResourceType.TRANSACTIONAL_ID, tid):
                raise KafkaError(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, tid)
        elif not allowed(ctx, Operation.IDEMPOTENT_WRITE, _C, CLUSTER_NAME):
            authz = ctx.broker.authorizer
            if not authz.any_allowed(principal(ctx), host(ctx), Operation.WRITE, _T):
                raise KafkaError(
                    ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "no IDEMPOTENT_WRITE and no topic WRITE"
                )
        return await fn(ctx, request)

    return h


def _refuse_unchecked(fn: Handler) -> Handler:
    async def h(ctx: RequestContext, request: Request) -> Body | None:
        require_cluster(ctx, Operation.ALL)  # only super users (or ALL on the cluster) use an unchecked API
        return await fn(ctx, request)

    return h


def _describable(ctx: RequestContext, resp: Body | None) -> Body | None:
    """Only the topics the principal may describe (a v0 request with no topics left means all)."""
    if resp is None:
        return None
    out = dict(resp)
    out["topics"] = [
        t
        for t in resp.get("topics") or ()
        if t["name"] is None or allowed(ctx, Operation.DESCRIBE, _T, t["name"])  # None: unknown topic id
    ]
    return out


def _metadata_ops(ctx: RequestContext, request: Request, resp: Body | None) -> Body | None:
    """The authorized operations a Metadata request asked for: the principal's own."""
    body = request.body
    topics, cluster = (
        body.get("include_topic_authorized_operations"),
        body.get("include_cluster_authorized_operations"),
    )
    if resp is None or not (topics or cluster):
        return resp
    out = dict(resp)
    if topics:
        out["topics"] = [
            {**t, "topic_authorized_operations": _ops(ctx, TOPIC_OPERATIONS, _T, t["name"])}
            if not t["error_code"]
            else t
            for t in resp.get("topics") or ()
        ]
    if cluster:
        out["cluster_authorized_operations"] = _ops(ctx, CLUSTER_OPERATIONS, _C, CLUSTER_NAME)
    return out


def _wrap_metadata(fn: Handler) -> Handler:
    """Metadata lists only describable topics; a named topic the principal may not describe answers
    TOPIC_AUTHORIZATION_FAILED; auto-creation needs CREATE on the cluster or the topic."""
    checked = _wrap_metadata_topics(fn)

    async def h(ctx: RequestContext, request: Request) -> Body | None:
        return _metadata_ops(ctx, request, await checked(ctx, request))

    return h


def _wrap_metadata_topics(fn: Handler) -> Handler:
    async def h(ctx: RequestContext, request: Request) -> Body | None:
        body = request.body
        requested = body.get("topics")
        if requested is None or (ctx.version == 0 and not requested):
            return _describable(ctx, await fn(ctx, request))
        if ctx.version >= 10 and any(t["name"] is None for t in requested):
            request = api_acls_versions.names_from_ids(ctx, request, "topics", "name")
            requested = request.body["topics"]
        replicas = ctx.broker.replicas
        auto = bool(body.get("allow_auto_topic_creation", True)) if ctx.version >= 4 else True
        create_all = not auto or allowed(ctx, Operation.CREATE, _C, CLUSTER_NAME)

        def ok(t: Any) -> bool:
            if t["name"] is None:  # an id no topic has: the handler answers UNKNOWN_TOPIC_ID
                return True
            name = t["name"]
            if not allowed(ctx, Operation.DESCRIBE, _T, name):
                return False
            return create_all or replicas.has_topic(name) or allowed(ctx, Operation.CREATE, _T, name)

        good, denied = _split(requested, ok)
        resp = _describable(
            ctx, await fn(ctx, _with(request, topics=good)) if denied else await fn(ctx, request)
        )
        return _extend(
            resp,
            "topics",
            [
                {"error_code": _TOPIC_DENIED, "name": t["name"], "is_internal": False, "partitions": []}
                for t in denied
            ],
        )

    return h


WRAPPERS: Mapping[int, Callable[[Handler], Handler]] = {
    0: _wrap_produce,
    3: _wrap_metadata,
    1: lambda fn: api_acls_versions.fetch_by_id(_wrap_fetch(fn)),  # v13+ by topic id
    2: _wrap_list_offsets,
    4: _wrap_cluster(Operation.CLUSTER_ACTION),  # LeaderAndIsr
    5: _wrap_cluster(Operation.CLUSTER_ACTION),  # StopReplica
    6: _wrap_cluster(Operation.CLUSTER_ACTION),  # UpdateMetadata
    7: _wrap_cluster(Operation.CLUSTER_ACTION),  # ControlledShutdown
    8: _wrap_offset_commit,
    9: _wrap_offset_fetch,
    10: _wrap_find_coordinator,
    11: _wrap_group(Operation.READ),  # JoinGroup
    12: _wrap_group(Operation.READ),  # Heartbeat
    13: _wrap_group(Operation.READ),  # LeaveGroup
    14: _wrap_group(Operation.READ),  # SyncGroup
    15: _wrap_describe_groups,
    16: _wrap_list_groups,
    19: _wrap_create_topics,
    20: _wrap_delete_topics,
    21: _wrap_delete_records,
    22: _wrap_init_producer_id,
    23: _wrap_leader_epoch,
    27: _wrap_cluster(Operation.CLUSTER_ACTION),  # WriteTxnMarkers (a coordinator broker)
    32: _wrap_configs(Operation.DESCRIBE_CONFIGS, "results"),
    33: _wrap_configs(Operation.ALTER_CONFIGS, "responses"),
    37: _wrap_create_partitions,
    42: _wrap_delete_groups,
    43: _wrap_cluster(Operation.ALTER),  # ElectLeaders
    44: _wrap_configs(Operation.ALTER_CONFIGS, "responses"),  # IncrementalAlterConfigs
    45: _wrap_cluster(Operation.ALTER),  # AlterPartitionReassignments
    46: _wrap_cluster(Operation.DESCRIBE),  # ListPartitionReassignments
    47: _wrap_offset_delete,
    56: _wrap_cluster(Operation.CLUSTER_ACTION),  # AlterPartition
    60: _wrap_describe_cluster,
    **api_acls_txn.WRAPPERS,  # the transaction coordinator's APIs
}
# Checked inside their own handlers or open to all: ApiVersions (18), SaslHandshake (17), SaslAuthenticate
# (36), the ACL APIs (29-31) and SCRAM credential APIs (50, 51).
UNWRAPPED = frozenset({17, 18, 29, 30, 31, 36, 50, 51})


def authorizing_registry(registry: HandlerRegistry) -> HandlerRegistry:
    """A copy of `registry` whose handlers check ACLs first (broker with an authorizer only). An API
    with neither a wrapper nor an entry in UNWRAPPED is refused outright (never served unchecked)."""
    out = HandlerRegistry()
    for entry in registry.api_versions():
        key = entry["api_key"]
        spec = registry.get(key)
        assert spec is not None
        wrap = WRAPPERS.get(key)
        if wrap is not None:
            fn = wrap(spec.fn)
        elif key in UNWRAPPED:
            fn = spec.fn
        else:
            fn = _refuse_unchecked(spec.fn)
        out.add(HandlerSpec(spec.api_key, spec.min_version, spec.max_version, fn, spec.error_body))
    return out
