"""Idempotent producers against a real broker: a retried batch is stored once, gaps and fenced epochs refused.

A client cannot be made to retry on demand, so the test plays the producer itself: it asks InitProducerId
for an id and sends the very batch a client would resend after a lost response.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from kafkad.protocol import ErrorCode
from kafkad.storage.records import SimpleRecord, build_batch, iter_headers
from tests.integration.broker_process import BrokerProcess
from tests.integration.raw_client import Raw

pytestmark = pytest.mark.integration


@pytest.fixture()
def raw(session_broker: BrokerProcess) -> Iterator[Raw]:
    r = Raw(session_broker.port)
    yield r
    r.close()


def _create(raw: Raw, topic: str) -> None:
    """Each test its own topic: the session broker outlives the test, and offsets are asserted from 0."""
    body = {"topics": [{"name": topic, "num_partitions": 1, "replication_factor": 1}], "timeout_ms": 30_000}
    assert raw.call(19, 4, body)["topics"][0]["error_code"] == 0


def _produce(raw: Raw, topic: str, batch: bytes, acks: int = -1) -> dict[str, Any]:
    body = {
        "acks": acks,
        "timeout_ms": 30_000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}],
    }
    part: dict[str, Any] = raw.call(0, 8, body)["responses"][0]["partition_responses"][0]
    return part


def _log_end(raw: Raw, topic: str) -> int:
    body = {
        "replica_id": -1,
        "isolation_level": 0,
        "topics": [{"name": topic, "partitions": [{"partition_index": 0, "timestamp": -1}]}],
    }
    offset: int = raw.call(2, 5, body)["topics"][0]["partitions"][0]["offset"]
    return offset


def test_retried_batch_is_not_duplicated(raw: Raw) -> None:
    topic = "idempotent-retried"
    _create(raw, topic)
    init = raw.call(22, 1, {"transactional_id": None, "transaction_timeout_ms": 60000})
    assert init["error_code"] == 0 and init["producer_id"] >= 0
    pid, epoch = init["producer_id"], init["producer_epoch"]
    now = int(time.time() * 1000)

    def batch(seq: int, n: int, ep: int = epoch) -> bytes:
        recs = [SimpleRecord(b"k%d" % (seq + i), b"v%d" % (seq + i), timestamp=now + i) for i in range(n)]
        return build_batch(recs, producer_id=pid, producer_epoch=ep, base_sequence=seq)

    first = batch(0, 5)
    got = _produce(raw, topic, first)
    assert (got["error_code"], got["base_offset"]) == (0, 0)
    # The client's retry of the same batch (same pid, epoch, sequence): answered with the original offsets.
    retry = _produce(raw, topic, first)
    assert (retry["error_code"], retry["base_offset"]) == (0, 0)
    assert _log_end(raw, topic) == 5

    second = _produce(raw, topic, batch(5, 3))
    assert (second["error_code"], second["base_offset"]) == (0, 5)
    # An older batch, still among the last five, is a duplicate too.
    assert _produce(raw, topic, first)["base_offset"] == 0
    assert _log_end(raw, topic) == 8

    # A gap in the sequence is refused, and nothing is appended.
    gap = _produce(raw, topic, batch(20, 1))
    assert gap["error_code"] == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert _log_end(raw, topic) == 8

    # The stored log holds each batch once.
    fetched = raw.call(
        1,
        11,
        {
            "replica_id": -1,
            "max_wait_ms": 0,
            "min_bytes": 0,
            "max_bytes": 1 << 20,
            "isolation_level": 0,
            "session_id": 0,
            "session_epoch": -1,
            "topics": [
                {
                    "topic": topic,
                    "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}],
                }
            ],
            "forgotten_topics_data": [],
            "rack_id": "",
        },
    )
    records = fetched["responses"][0]["partitions"][0]["records"]
    headers = list(iter_headers(bytes(records)))
    assert [(h.base_offset, h.last_offset, h.base_sequence) for h in headers] == [(0, 4, 0), (5, 7, 5)]


def test_fenced_epoch_is_refused(raw: Raw) -> None:
    topic = "idempotent-fenced"
    _create(raw, topic)
    init = raw.call(22, 1, {"transactional_id": None, "transaction_timeout_ms": 60000})
    pid, epoch = init["producer_id"], init["producer_epoch"]
    now = int(time.time() * 1000)
    newer = build_batch(
        [SimpleRecord(b"k", b"v", timestamp=now)], producer_id=pid, producer_epoch=epoch + 1, base_sequence=0
    )
    assert _produce(raw, topic, newer)["error_code"] == 0
    older = build_batch(
        [SimpleRecord(b"k", b"v", timestamp=now)], producer_id=pid, producer_epoch=epoch, base_sequence=1
    )
    before = _log_end(raw, topic)
    assert _produce(raw, topic, older)["error_code"] == ErrorCode.INVALID_PRODUCER_EPOCH
    assert _log_end(raw, topic) == before
