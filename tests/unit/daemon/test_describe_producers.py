"""DescribeProducers (61): a leader's producers (epoch, last sequence, coordinator epoch, the open
transaction's first offset) and per-partition errors, encoded as the schema says."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kafkad.protocol import ErrorCode, RequestHeader
from kafkad.protocol.codec import decode_response, encode_response_bytes
from kafkad.storage.records import SimpleRecord, build_batch
from tests.unit.daemon.test_handlers import call, create, make_broker


def describe(b: Any, parts: list[int]) -> list[dict[str, Any]]:
    body = call(b, 61, 0, {"topics": [{"name": "t", "partition_indexes": parts}]})
    header = RequestHeader(61, 0, 7, "test")
    _, decoded = decode_response(61, 0, encode_response_bytes(header, body)[4:])
    out: list[dict[str, Any]] = decoded["topics"][0]["partitions"]
    return out


def test_describe_producers_shows_open_transactions_and_errors(tmp_path: Path) -> None:
    b = make_broker(tmp_path)
    create(b, "t")
    part = b.replicas.get_or_raise("t", 0)
    for pid, transactional in ((5, True), (6, False)):
        raw = build_batch(
            [SimpleRecord(None, b"v", timestamp=123)] * 3,
            producer_id=pid,
            producer_epoch=2,
            base_sequence=0,
            is_transactional=transactional,
        )
        part.append_as_leader(memoryview(bytearray(raw)), now_ms=1, required_acks=1)
    ok, missing = describe(b, [0, 4])
    assert ok["error_code"] == 0
    got = {p["producer_id"]: p for p in ok["active_producers"]}
    assert {k: got[5][k] for k in ("producer_epoch", "last_sequence", "last_timestamp")} == {
        "producer_epoch": 2,
        "last_sequence": 2,
        "last_timestamp": 123,
    }
    assert (got[5]["current_txn_start_offset"], got[6]["current_txn_start_offset"]) == (0, -1)
    assert missing["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert missing["active_producers"] == []
    part.append_txn_marker(5, 2, True, 4, now_ms=9)
    (after,) = describe(b, [0])
    got = {p["producer_id"]: p for p in after["active_producers"]}
    assert (got[5]["current_txn_start_offset"], got[5]["coordinator_epoch"]) == (-1, 4)
