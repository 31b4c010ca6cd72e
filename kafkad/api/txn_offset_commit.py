"""TxnOffsetCommit (28) v0-4: a transactional producer commits its consumer group's offsets inside its
transaction (confluent-kafka's send_offsets_to_transaction, after AddOffsetsToTxn added the group's
__consumer_offsets partition to the transaction).

As Kafka's KafkaApis.handleTxnOffsetCommitRequest and GroupCoordinator.handleTxnCommitOffsets: unknown
topics or partitions answer UNKNOWN_TOPIC_OR_PARTITION; when the transaction coordinator is wired in
(`txn_verifier`, KIP-890) it first confirms the offsets partition is in the producer's ongoing transaction;
the offsets are appended as the producer's transactional batch and stay pending until its marker (see
groups/txn_offsets.py). In cluster mode the answer waits for the partition's ISR, as OffsetCommit does.
v0-1 clients (before KAFKA-7296) get COORDINATOR_NOT_AVAILABLE instead of COORDINATOR_LOAD_IN_PROGRESS.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

from kafkad.coordinator.group import OffsetCommit
from kafkad.coordinator.group.config import OFFSETS_TOPIC
from kafkad.coordinator.group.ownership import check_coordinator, commit_replicated
from kafkad.coordinator.group.records import partition_for
from kafkad.coordinator.group.service import coordinator_if_ready, ready_coordinator
from kafkad.coordinator.group.store import Producer
from kafkad.coordinator.group.txn_offsets import txn_append_error
from kafkad.network.registry import RequestContext, handler
from kafkad.protocol import ApiKey, ErrorCode, KafkaError, Request

log = logging.getLogger(__name__)


def _answer(request: Request, version: int, results: Mapping[tuple[str, int], ErrorCode]) -> dict[str, Any]:
    def code(tp: tuple[str, int]) -> int:
        c = results[tp]
        if version < 2 and c is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            c = ErrorCode.COORDINATOR_NOT_AVAILABLE
        return int(c)

    return {
        "throttle_time_ms": 0,
        "topics": [
            {
                "name": t["name"],
                "partitions": [
                    {
                        "partition_index": p["partition_index"],
                        "error_code": code((t["name"], p["partition_index"])),
                    }
                    for p in t["partitions"] or []
                ],
            }
            for t in request.body.get("topics") or []
        ],
    }


def _error_body(request: Request, code: ErrorCode) -> Mapping[str, Any]:
    tps = [
        (t["name"], p["partition_index"])
        for t in request.body.get("topics") or []
        for p in t["partitions"] or []
    ]
    return _answer(request, 4, dict.fromkeys(tps, code))


async def _verify(verifier: Any, txn_id: str, producer: Producer, index: int) -> ErrorCode:
    """The coordinator's answer for the offsets partition; its own task, as the dispatcher steps a
    handler's coroutine outside any task at first and a remote check needs one (asyncio.timeout)."""
    check = asyncio.ensure_future(
        verifier.verify(txn_id, producer.producer_id, producer.producer_epoch, OFFSETS_TOPIC, index)
    )
    try:
        return ErrorCode(await check)
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # retriable for the client, as Produce's verification answers
        log.warning("transaction verification of %s-%d for %s failed: %r", OFFSETS_TOPIC, index, txn_id, exc)
        return ErrorCode.COORDINATOR_NOT_AVAILABLE


@handler(ApiKey.TXN_OFFSET_COMMIT, 0, 4, error_body=_error_body)
async def handle(ctx: RequestContext, request: Request) -> Mapping[str, Any]:
    b = request.body
    group_id = b["group_id"] or ""
    asked = [(t["name"], p) for t in b["topics"] or [] for p in t["partitions"] or []]
    try:
        check_coordinator(ctx.broker, group_id)
        coordinator = coordinator_if_ready(ctx.broker) or await ready_coordinator(ctx.broker)
    except KafkaError as e:
        return _answer(request, ctx.version, {(t, p["partition_index"]): e.code for t, p in asked})
    producer = Producer(b["producer_id"], b["producer_epoch"])
    verifier = ctx.broker.txn_verifier
    if verifier is not None:
        index = partition_for(group_id, coordinator.offsets_partition_count)
        verified = await _verify(verifier, b["transactional_id"] or "", producer, index)
        if verified is not ErrorCode.NONE:
            code = txn_append_error(KafkaError(verified, "transaction verification"))
            return _answer(request, ctx.version, {(t, p["partition_index"]): code for t, p in asked})
    offsets = {
        (t, p["partition_index"]): OffsetCommit(
            p["committed_offset"], p.get("committed_leader_epoch", -1), p.get("committed_metadata")
        )
        for t, p in asked
    }
    results = coordinator.commit_txn_offsets(
        group_id,
        producer,
        b.get("generation_id", -1),
        b.get("member_id") or "",
        b.get("group_instance_id"),
        offsets,
    )
    own = ctx.broker.group_ownership  # cluster mode: answer once the offsets are replicated
    appended = [tp for tp, code in results.items() if code is ErrorCode.NONE]
    if own is not None and appended:
        failed = await commit_replicated(own, group_id)
        if failed is not None:
            coordinator.fail_txn_commit(group_id, producer.producer_id, appended)
            results.update(dict.fromkeys(appended, failed))
    return _answer(request, ctx.version, results)
