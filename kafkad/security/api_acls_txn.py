"""Authorization of the transaction coordinator's APIs, as Kafka's KafkaApis checks them (joined into
api_acls.WRAPPERS).

AddPartitionsToTxn: before v4 WRITE on the transactional id (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED on
every partition) and WRITE on each topic (TOPIC_AUTHORIZATION_FAILED, the others OPERATION_NOT_ATTEMPTED,
the coordinator not asked); v4+ is the brokers' form: CLUSTER_ACTION. AddOffsetsToTxn: WRITE on the id,
READ on the group. EndTxn: WRITE on the id. DescribeTransactions: DESCRIBE on each id (its own entry
errs). ListTransactions: only the ids the principal may DESCRIBE. DescribeProducers: READ on each topic
(TOPIC_AUTHORIZATION_FAILED on each of its partitions, the handler not asked for it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kafkad.network.registry import Handler, RequestContext
from kafkad.protocol import ErrorCode, KafkaError, Request
from kafkad.security.acl import Operation, ResourceType
from kafkad.security.authz import allowed, require_cluster, require_group

Body = Mapping[str, Any]
_TXN = ResourceType.TRANSACTIONAL_ID


def _require_txn(ctx: RequestContext, op: Operation, txn_id: str) -> None:
    if not allowed(ctx, op, _TXN, txn_id):
        raise KafkaError(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, txn_id)


def _v3_results(topics: Any, code_of: Callable[[str], ErrorCode]) -> list[dict[str, Any]]:
    return [
        {
            "name": t["name"],
            "results_by_partition": [
                {"partition_index": p, "partition_error_code": int(code_of(t["name"]))}
                for p in t["partitions"]
            ],
        }
        for t in topics or ()
    ]


def _wrap_add_partitions(fn: Handler) -> Handler:
    async def h(ctx: RequestContext, request: Request) -> Body | None:
        if ctx.version >= 4:
            require_cluster(ctx, Operation.CLUSTER_ACTION)
            return await fn(ctx, request)
        body = request.body
        topics = body.get("v3_and_below_topics")
        if not allowed(ctx, Operation.WRITE, _TXN, body["v3_and_below_transactional_id"]):
            code = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
            return {
                "throttle_time_ms": 0,
                "results_by_topic_v3_and_below": _v3_results(topics, lambda _t: code),
            }
        denied = {
            t["name"]
            for t in topics or ()
            if not allowed(ctx, Operation.WRITE, ResourceType.TOPIC, t["name"])
        }
        if denied:
            return {
                "throttle_time_ms": 0,
                "results_by_topic_v3_and_below": _v3_results(
                    topics,
                    lambda t: (
                        ErrorCode.TOPIC_AUTHORIZATION_FAILED
                        if t in denied
                        else ErrorCode.OPERATION_NOT_ATTEMPTED
                    ),
                ),
            }
        return await fn(ctx, request)

    return h


def _wrap_add_offsets(fn: Handler) -> Handler:
    async def h(ctx: RequestContext, request: Request) -> Body | None:
        _require_txn(ctx, Operation.WRITE, request.body["transactional_id"])
        require_group(ctx, Operation.READ, request.body["group_id"])
        return await fn(ctx, request)

    return h


def _wrap_end_txn(fn: Handler) -> Handler:
    async def h(ctx: RequestContext, request: Request) -> Body | None:
        _require_txn(ctx, Operation.WRITE, request.body["transactional_id"])
        return await fn(ctx, request)

    return h


def _wrap_describe_transactions(fn: Handler) -> Handler:
    async def h(ctx: RequestContext, request: Request) -> Body | None:
        ids = list(request.body.get("transactional_ids") or ())
        ok = [t for t in ids if allowed(ctx, Operation.DESCRIBE, _TXN, t)]
        resp = await fn(ctx, Request(request.header, {**request.body, "transactional_ids": ok}))
        if resp is None or len(ok) == len(ids):
            return resp
        denied = [
            {
                "error_code": int(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
                "transactional_id": t,
                "transaction_state": "",
                "transaction_timeout_ms": 0,
                "transaction_start_time_ms": -1,
                "producer_id": -1,
                "producer_epoch": -1,
                "topics": [],
            }
            for t in ids
            if t not in ok
        ]
        return {**resp, "transaction_states": list(resp.get("transaction_states") or ()) + denied}

    return h


def _wrap_list_transactions(fn: Handler) -> Handler:
    async def h(ctx: RequestContext, request: Request) -> Body | None:
        resp = await fn(ctx, request)
        if resp is None:
            return None
        states = [
            s
            for s in resp.get("transaction_states") or ()
            if allowed(ctx, Operation.DESCRIBE, _TXN, s["transactional_id"])
        ]
        return {**resp, "transaction_states": states}

    return h


def _wrap_describe_producers(fn: Handler) -> Handler:
    async def h(ctx: RequestContext, request: Request) -> Body | None:
        topics = list(request.body.get("topics") or ())
        ok = [t for t in topics if allowed(ctx, Operation.READ, ResourceType.TOPIC, t["name"])]
        if len(ok) == len(topics):
            return await fn(ctx, request)
        resp = await fn(ctx, Request(request.header, {**request.body, "topics": ok}))
        if resp is None:
            return None
        served = {t["name"]: t for t in resp.get("topics") or ()}
        code = int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        out = []
        for t in topics:  # in the request's order, as KafkaApis answers
            if t in ok:
                out.append(served[t["name"]])
                continue
            parts = [
                {
                    "partition_index": p,
                    "error_code": code,
                    "error_message": "Topic authorization failed.",  # Kafka's ApiError(error).message
                    "active_producers": [],
                }
                for p in t["partition_indexes"]
            ]
            out.append({"name": t["name"], "partitions": parts})
        return {**resp, "topics": out}

    return h


WRAPPERS: Mapping[int, Callable[[Handler], Handler]] = {
    24: _wrap_add_partitions,
    25: _wrap_add_offsets,
    26: _wrap_end_txn,
    65: _wrap_describe_transactions,
    66: _wrap_list_transactions,
    61: _wrap_describe_producers,
}
