"""TxnOffsetCommit and OffsetFetch require_stable on a real standalone kafkad (issue 20 item 4), driven by
confluent-kafka's transactional producer (send_offsets_to_transaction: AddOffsetsToTxn then TxnOffsetCommit)
and checked over the wire with OffsetFetch v7/v8.

Until the transaction ends, the group's offsets are the ones committed before and require_stable answers
UNSTABLE_OFFSET_COMMIT; a commit makes the transaction's offsets the group's, an abort drops them. An open
transaction survives a restart pending (the replay of __consumer_offsets sees its batch without a marker),
until the coordinator aborts it at its timeout. A zombie producer (fenced by a new one with the same
transactional.id) cannot commit offsets. Needs the transaction coordinator (txn-coord) and the partition
side (txn-log) of issue 20 besides this branch's group side.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from kafkad.protocol import ApiKey, ErrorCode
from tests.integration.broker_process import BrokerProcess
from tests.integration.raw_client import Raw

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

GROUP = "eos-group"
UNSTABLE = int(ErrorCode.UNSTABLE_OFFSET_COMMIT)
OVERRIDES = {
    "offsets.topic.num.partitions": "3",
    "transaction.state.log.num.partitions": "3",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
    "num.partitions": "1",
}


def _fetch(raw: Raw, *, stable: bool, version: int = 7) -> tuple[int, int]:
    """(error code, committed offset) of in-0 for GROUP."""
    topics = [{"name": "in", "partition_indexes": [0]}]
    if version >= 8:
        body = raw.call(
            ApiKey.OFFSET_FETCH,
            version,
            {"groups": [{"group_id": GROUP, "topics": topics}], "require_stable": stable},
        )
        part: dict[str, Any] = body["groups"][0]["topics"][0]["partitions"][0]
    else:
        body = raw.call(
            ApiKey.OFFSET_FETCH, version, {"group_id": GROUP, "topics": topics, "require_stable": stable}
        )
        part = body["topics"][0]["partitions"][0]
    return part["error_code"], part["committed_offset"]


def _setup(broker: BrokerProcess) -> Raw:
    """Topics in/out exist; GROUP has offset 5 on in-0 (a plain commit)."""
    raw = Raw(broker.port)
    raw.call(ApiKey.METADATA, 1, {"topics": [{"name": "in"}, {"name": "out"}]})  # auto-created
    assert raw.call(ApiKey.FIND_COORDINATOR, 1, {"key": GROUP, "key_type": 0})["error_code"] == 0
    plain = raw.call(
        ApiKey.OFFSET_COMMIT,
        2,
        {"group_id": GROUP, "generation_id_or_member_epoch": -1, "member_id": "", "retention_time_ms": -1,
         "topics": [{"name": "in", "partitions": [{"partition_index": 0, "committed_offset": 5}]}]},
    )  # fmt: skip
    assert plain["topics"][0]["partitions"][0]["error_code"] == 0
    return raw


def _producer(broker: BrokerProcess, txn_id: str, **extra: Any) -> Producer:
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": txn_id, "log_level": 0, **extra})
    p.init_transactions(60)
    return p


def _group_metadata(broker: BrokerProcess) -> Any:
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": GROUP, "log_level": 0})
    meta = c.consumer_group_metadata()
    c.close()
    return meta


def _send_offsets(p: Producer, meta: Any, offset: int) -> None:
    p.begin_transaction()
    p.produce("out", f"for {offset}".encode(), partition=0)
    p.send_offsets_to_transaction([TopicPartition("in", 0, offset)], meta, 60)


def _wait_stable(raw: Raw, timeout_s: float) -> tuple[int, int]:
    deadline = time.monotonic() + timeout_s
    while True:
        got = _fetch(raw, stable=True)
        if got[0] != UNSTABLE or time.monotonic() > deadline:
            return got
        time.sleep(0.1)


def test_offsets_pending_until_commit_dropped_on_abort(tmp_path: Path) -> None:
    with BrokerProcess(tmp_path / "kafkad", OVERRIDES) as broker:
        raw = _setup(broker)
        meta = _group_metadata(broker)
        p = _producer(broker, "tx-1")
        _send_offsets(p, meta, 10)
        assert _fetch(raw, stable=False) == (0, 5)  # the committed offset, not the pending one
        assert _fetch(raw, stable=True) == (UNSTABLE, -1)
        assert _fetch(raw, stable=True, version=8) == (UNSTABLE, -1)
        p.commit_transaction(60)
        # EndTxn answers once the decision is logged; the markers follow (Kafka too): stable soon after
        assert _wait_stable(raw, 30) == (0, 10)
        _send_offsets(p, meta, 20)
        assert _fetch(raw, stable=True) == (UNSTABLE, -1)
        p.abort_transaction(60)
        assert _wait_stable(raw, 30) == (0, 10)
        raw.close()
        broker.restart()  # the replay applies the markers the same way
        raw = Raw(broker.port)
        assert raw.call(ApiKey.FIND_COORDINATOR, 1, {"key": GROUP, "key_type": 0})["error_code"] == 0
        assert _fetch(raw, stable=True) == (0, 10)
        raw.close()
        p.flush(10)


def test_open_transaction_survives_a_restart_until_its_timeout(tmp_path: Path) -> None:
    with BrokerProcess(tmp_path / "kafkad", OVERRIDES) as broker:
        raw = _setup(broker)
        meta = _group_metadata(broker)
        p = _producer(broker, "tx-timeout", **{"transaction.timeout.ms": 5000})
        _send_offsets(p, meta, 30)
        assert _fetch(raw, stable=True) == (UNSTABLE, -1)
        raw.close()
        broker.restart()
        raw = Raw(broker.port)
        assert raw.call(ApiKey.FIND_COORDINATOR, 1, {"key": GROUP, "key_type": 0})["error_code"] == 0
        first = _fetch(raw, stable=True)
        # the coordinator aborts it once it is older than its timeout: the earlier offset is back
        assert _wait_stable(raw, 60) == (0, 5), first
        assert first in ((UNSTABLE, -1), (0, 5))
        raw.close()
        del p


def test_a_fenced_producer_cannot_commit_offsets(tmp_path: Path) -> None:
    with BrokerProcess(tmp_path / "kafkad", OVERRIDES) as broker:
        raw = _setup(broker)
        meta = _group_metadata(broker)
        zombie = _producer(broker, "tx-z")
        zombie.begin_transaction()
        zombie.produce("out", b"zombie", partition=0)
        zombie.flush(30)
        successor = _producer(broker, "tx-z")  # bumps the epoch, aborts the zombie's transaction
        with pytest.raises(KafkaException) as info:
            zombie.send_offsets_to_transaction([TopicPartition("in", 0, 40)], meta, 30)
        assert info.value.args[0].fatal() or info.value.args[0].txn_requires_abort(), info.value
        assert _fetch(raw, stable=True) == (0, 5)
        _send_offsets(successor, meta, 50)
        successor.commit_transaction(60)
        assert _wait_stable(raw, 30) == (0, 50)
        raw.close()
