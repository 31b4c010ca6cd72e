"""TxnOffsetCommit and OffsetFetch require_stable on a real standalone kafkad, over the wire (issue 20 item 4).

The transactional offsets of a producer stay pending: a plain OffsetFetch still answers the offset committed
before, a require_stable one (v7, and v8's batched form) UNSTABLE_OFFSET_COMMIT; they stay pending across a
restart (the replay of __consumer_offsets sees a transaction without its marker). An older producer epoch is
fenced by the partition's producer state. `test_markers_complete_them` needs the WriteTxnMarkers handler of
the txn-log branch: a COMMIT marker makes them the group's offsets, an ABORT drops them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kafkad.protocol import ApiKey, ErrorCode
from tests.integration.broker_process import BrokerProcess
from tests.integration.raw_client import Raw

pytestmark = pytest.mark.integration

GROUP = "eos-group"
PID, EPOCH = 7001, 2


def _commit(raw: Raw, offset: int, *, epoch: int = EPOCH, pid: int = PID, topic: str = "in") -> int:
    body = raw.call(
        ApiKey.TXN_OFFSET_COMMIT,
        3,
        {
            "transactional_id": "tx-1",
            "group_id": GROUP,
            "producer_id": pid,
            "producer_epoch": epoch,
            "generation_id": -1,
            "member_id": "",
            "group_instance_id": None,
            "topics": [{"name": topic, "partitions": [{"partition_index": 0, "committed_offset": offset,
                                                       "committed_metadata": ""}]}],
        },
    )  # fmt: skip
    code: int = body["topics"][0]["partitions"][0]["error_code"]
    return code


def _fetch(raw: Raw, *, stable: bool, version: int = 7) -> tuple[int, int]:
    """(error code, committed offset) of in-0."""
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


def _setup(raw: Raw) -> None:
    raw.call(ApiKey.METADATA, 1, {"topics": [{"name": "in"}]})  # auto-created
    assert raw.call(ApiKey.FIND_COORDINATOR, 1, {"key": GROUP, "key_type": 0})["error_code"] == 0
    plain = raw.call(
        ApiKey.OFFSET_COMMIT,
        2,
        {"group_id": GROUP, "generation_id_or_member_epoch": -1, "member_id": "", "retention_time_ms": -1,
         "topics": [{"name": "in", "partitions": [{"partition_index": 0, "committed_offset": 5}]}]},
    )  # fmt: skip
    assert plain["topics"][0]["partitions"][0]["error_code"] == 0


UNSTABLE = int(ErrorCode.UNSTABLE_OFFSET_COMMIT)


def test_pending_offsets_are_unstable_and_survive_a_restart(tmp_path: Path) -> None:
    with BrokerProcess(tmp_path / "kafkad", {"offsets.topic.num.partitions": "3"}) as broker:
        raw = Raw(broker.port)
        _setup(raw)
        assert _commit(raw, 10) == 0
        assert _fetch(raw, stable=False) == (0, 5)  # the committed offset, not the pending one
        assert _fetch(raw, stable=True) == (UNSTABLE, -1)
        assert _fetch(raw, stable=True, version=8) == (UNSTABLE, -1)
        assert _commit(raw, 11, topic="no-such-topic") == int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        raw.close()
        broker.restart()
        raw = Raw(broker.port)
        assert raw.call(ApiKey.FIND_COORDINATOR, 1, {"key": GROUP, "key_type": 0})["error_code"] == 0
        assert _fetch(raw, stable=False) == (0, 5)
        assert _fetch(raw, stable=True) == (UNSTABLE, -1)
        raw.close()


def test_an_older_producer_epoch_is_fenced(tmp_path: Path) -> None:
    with BrokerProcess(tmp_path / "kafkad", {"offsets.topic.num.partitions": "3"}) as broker:
        raw = Raw(broker.port)
        _setup(raw)
        assert _commit(raw, 10, epoch=EPOCH) == 0
        assert _commit(raw, 12, epoch=EPOCH) == 0  # the same epoch again: its sequence continues
        assert _commit(raw, 11, epoch=EPOCH - 1) == int(ErrorCode.INVALID_PRODUCER_EPOCH)
        assert _fetch(raw, stable=True) == (UNSTABLE, -1)
        raw.close()


def _markers(raw: Raw, committed: bool) -> int:
    body = raw.call(
        ApiKey.WRITE_TXN_MARKERS,
        1,
        {"markers": [{"producer_id": PID, "producer_epoch": EPOCH, "transaction_result": committed,
                      "coordinator_epoch": 0,
                      "topics": [{"name": "__consumer_offsets", "partition_indexes": list(range(3))}]}]},
    )  # fmt: skip
    codes = {p["error_code"] for t in body["markers"][0]["topics"] for p in t["partitions"]}
    return max(codes)


def test_markers_complete_them(tmp_path: Path) -> None:
    """Needs txn-log's WriteTxnMarkers handler (a marker on a partition the producer never wrote is
    answered as Kafka does; the group's partition is among the three)."""
    with BrokerProcess(tmp_path / "kafkad", {"offsets.topic.num.partitions": "3"}) as broker:
        raw = Raw(broker.port)
        _setup(raw)
        assert _commit(raw, 10) == 0
        _markers(raw, committed=False)
        assert _fetch(raw, stable=True) == (0, 5)  # aborted: gone, the earlier offset stays
        assert _commit(raw, 20) == 0
        _markers(raw, committed=True)
        assert _fetch(raw, stable=True) == (0, 20)
        raw.close()
        broker.restart()  # the replay applies the markers the same way
        raw = Raw(broker.port)
        assert raw.call(ApiKey.FIND_COORDINATOR, 1, {"key": GROUP, "key_type": 0})["error_code"] == 0
        assert _fetch(raw, stable=True) == (0, 20)
        raw.close()
