"""Produce of transactional batches: they need the request's transactional_id (Kafka's KafkaApis), and
KIP-890's verification asks the `txn_verifier` service before a batch opens a transaction on a partition
(never for a transaction already open there); a refusal fails that partition only and appends nothing."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from kafkad.network.registry import REGISTRY, RequestContext
from kafkad.protocol import ErrorCode, Request, RequestHeader
from kafkad.storage.records import SimpleRecord, build_batch
from tests.unit.daemon.test_handlers import create, make_broker

PID = 77


class RecordingVerifier:
    """A TxnVerifier answering from a table; records what it was asked."""

    def __init__(self, answers: dict[tuple[str, int], ErrorCode]) -> None:
        self.answers = answers
        self.asked: list[tuple[str, int, int, str, int]] = []

    async def verify(
        self, transactional_id: str, producer_id: int, producer_epoch: int, topic: str, partition: int
    ) -> ErrorCode:
        self.asked.append((transactional_id, producer_id, producer_epoch, topic, partition))
        return self.answers.get((topic, partition), ErrorCode.NONE)


def txn_batch(seq: int) -> bytes:
    return build_batch(
        [SimpleRecord(None, b"v", timestamp=1)],
        producer_id=PID,
        producer_epoch=0,
        base_sequence=seq,
        is_transactional=True,
    )


def produce(b: Any, txn_id: str | None, parts: dict[tuple[str, int], bytes]) -> dict[tuple[str, int], int]:
    topics: dict[str, list[dict[str, Any]]] = {}
    for (topic, index), records in parts.items():
        topics.setdefault(topic, []).append({"index": index, "records": memoryview(bytearray(records))})
    body = {
        "acks": 1,
        "timeout_ms": 1000,
        "transactional_id": txn_id,
        "topic_data": [{"name": t, "partition_data": p} for t, p in topics.items()],
    }
    spec = REGISTRY.get(0)
    assert spec is not None
    header = RequestHeader(0, 9, 1, "test")
    fn = spec.fn

    async def call() -> Any:
        return await fn(RequestContext(b, header), Request(header, body))

    resp = asyncio.run(call())
    return {
        (t["name"], p["index"]): p["error_code"] for t in resp["responses"] for p in t["partition_responses"]
    }


def test_transactional_records_need_a_transactional_id(tmp_path: Path) -> None:
    b = make_broker(tmp_path)
    create(b, "t")
    assert produce(b, None, {("t", 0): txn_batch(0)}) == {
        ("t", 0): ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    }
    assert b.replicas.get_or_raise("t", 0).log_end_offset == 0
    assert produce(b, "tx", {("t", 0): txn_batch(0)}) == {("t", 0): 0}  # no verifier here: accepted


def test_verifier_is_asked_before_a_batch_opens_a_transaction(tmp_path: Path) -> None:
    b = make_broker(tmp_path)
    create(b, "t", 2)
    verifier = RecordingVerifier({("t", 1): ErrorCode.INVALID_TXN_STATE})
    b.txn_verifier = verifier
    out = produce(b, "tx", {("t", 0): txn_batch(0), ("t", 1): txn_batch(0)})
    assert out == {("t", 0): 0, ("t", 1): ErrorCode.INVALID_TXN_STATE}
    assert sorted(verifier.asked) == [("tx", PID, 0, "t", 0), ("tx", PID, 0, "t", 1)]
    assert b.replicas.get_or_raise("t", 1).log_end_offset == 0  # the refused partition got nothing
    # The transaction is open on t-0 now: its next batch is not verified again.
    verifier.asked.clear()
    assert produce(b, "tx", {("t", 0): txn_batch(1)}) == {("t", 0): 0}
    assert verifier.asked == []


class MarkerDuringVerification:
    """A coordinator that ends the producer's transaction on the partition while it answers the check
    (its marker lands on the partition before the verified Produce appends), then says yes."""

    def __init__(self, broker: Any) -> None:
        self.broker = broker

    async def verify(
        self, transactional_id: str, producer_id: int, producer_epoch: int, topic: str, partition: int
    ) -> ErrorCode:
        part = self.broker.replicas.get_or_raise(topic, partition)
        part.append_txn_marker(producer_id, producer_epoch, True, 0, now_ms=1)
        await asyncio.sleep(0)
        return ErrorCode.NONE


def test_a_marker_during_verification_refuses_the_append(tmp_path: Path) -> None:
    b = make_broker(tmp_path)
    create(b, "t")
    part = b.replicas.get_or_raise("t", 0)
    assert produce(b, "tx", {("t", 0): txn_batch(0)}) == {("t", 0): 0}  # a first transaction, unverified
    part.append_txn_marker(PID, 0, True, 0, now_ms=1)  # ...committed
    b.txn_verifier = MarkerDuringVerification(b)
    # A late batch: verified "yes", but its transaction ended meanwhile: appending it would leave a
    # transaction open that no coordinator will end (KIP-890's hanging transaction).
    assert produce(b, "tx", {("t", 0): txn_batch(1)}) == {("t", 0): ErrorCode.INVALID_TXN_STATE}
    assert not part.has_ongoing_txn(PID)
    assert part.last_stable_offset == part.high_watermark == part.log_end_offset
