"""AddPartitionsToTxn (24) v0-5: a producer adds partitions to its transaction (the coordinator appends
Ongoing with them before answering). v4+ (KIP-890) batch several transactions, each with its own result, and
carry the brokers' verify_only form: "are these partitions in the transaction?" (NONE or
TRANSACTION_ABORTABLE each), asked by a partition leader before it accepts a transactional batch.

As Kafka's KafkaApis: a partition that does not exist is UNKNOWN_TOPIC_OR_PARTITION and the others of that
transaction OPERATION_NOT_ATTEMPTED; one coordinator error is every partition's error; before v2
PRODUCER_FENCED is answered as INVALID_PRODUCER_EPOCH.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kafkad.coordinator.transaction.service import coordinator_of
from kafkad.network.registry import RequestContext, handler
from kafkad.protocol import ApiKey, ErrorCode, Request

TopicPartition = tuple[str, int]


def _partitions(topics: Iterable[Mapping[str, Any]] | None) -> list[TopicPartition]:
    return [(t["name"], p) for t in topics or () for p in t["partitions"] or ()]


def _results(errors: Mapping[TopicPartition, ErrorCode]) -> list[dict[str, Any]]:
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (topic, index), code in errors.items():
        by_topic.setdefault(topic, []).append({"partition_index": index, "partition_error_code": int(code)})
    return [{"name": t, "results_by_partition": ps} for t, ps in by_topic.items()]


def _error_body(request: Request, code: ErrorCode) -> Mapping[str, Any]:
    body = request.body
    if body.get("transactions") is not None:
        return {"throttle_time_ms": 0, "error_code": int(code), "results_by_transaction": []}
    parts = _partitions(body.get("v3_and_below_topics"))
    return {"throttle_time_ms": 0, "results_by_topic_v3_and_below": _results(dict.fromkeys(parts, code))}


async def _one(
    ctx: RequestContext, txn: Mapping[str, Any], verify_only: bool
) -> dict[TopicPartition, ErrorCode]:
    parts = _partitions(txn["topics"])
    replicas = ctx.broker.replicas
    unknown = [tp for tp in parts if not replicas.partition_known(*tp)]
    if unknown:
        return {
            tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if tp in unknown else ErrorCode.OPERATION_NOT_ATTEMPTED
            for tp in parts
        }
    coordinator = coordinator_of(ctx.broker)
    txn_id, pid, epoch = txn["transactional_id"], txn["producer_id"], txn["producer_epoch"]
    if verify_only:
        found = coordinator.verify_partitions(txn_id, pid, epoch, parts)
        if not isinstance(found, ErrorCode):
            return found
        code = found
    else:
        code = await coordinator.add_partitions(txn_id, pid, epoch, parts)
    if code is ErrorCode.PRODUCER_FENCED and ctx.version < 2:
        code = ErrorCode.INVALID_PRODUCER_EPOCH
    return dict.fromkeys(parts, code)


@handler(ApiKey.ADD_PARTITIONS_TO_TXN, 0, 5, error_body=_error_body)
async def handle(ctx: RequestContext, request: Request) -> Mapping[str, Any]:
    body = request.body
    if ctx.version < 4:
        txn = {
            "transactional_id": body["v3_and_below_transactional_id"],
            "producer_id": body["v3_and_below_producer_id"],
            "producer_epoch": body["v3_and_below_producer_epoch"],
            "topics": body["v3_and_below_topics"],
        }
        errors = await _one(ctx, txn, verify_only=False)
        return {"throttle_time_ms": 0, "results_by_topic_v3_and_below": _results(errors)}
    results = []
    for txn in body["transactions"] or ():
        errors = await _one(ctx, txn, verify_only=bool(txn["verify_only"]))
        results.append({"transactional_id": txn["transactional_id"], "topic_results": _results(errors)})
    return {"throttle_time_ms": 0, "error_code": 0, "results_by_transaction": results}
