"""kafkad-replica-verification's comparison (verify_round) over replicas answering from given logs: identical
replicas advance to the smallest HW; a changed byte or a shifted offset is Kafka's mismatch message. The wire
path runs against three real kafkad in tests/cluster/test_replication.py."""

from __future__ import annotations

from typing import Any

import pytest

from kafkad.storage.records import SimpleRecord, build_batch
from kafkad.tools.replica_verification import Mismatch, PartitionCheck, report, verify_round


def _log(values: list[bytes], base: int = 0) -> bytes:
    return b"".join(
        build_batch([SimpleRecord(None, v, timestamp=1)], base_offset=base + i) for i, v in enumerate(values)
    )


class _Node:
    def __init__(self, log: bytes, hw: int) -> None:
        self.log, self.hw = log, hw

    def send(self, api_key: int, body: dict[str, Any]) -> dict[str, Any]:
        offset = body["topics"][0]["partitions"][0]["fetch_offset"]
        # batches of one record each: batch i holds offset i
        batches, pos = [], 0
        while pos < len(self.log):
            size = int.from_bytes(self.log[pos + 8 : pos + 12], "big") + 12
            batches.append(self.log[pos : pos + size])
            pos += size
        return {
            "error_code": 0,
            "responses": [
                {
                    "partitions": [
                        {"error_code": 0, "high_watermark": self.hw, "records": b"".join(batches[offset:])}
                    ]
                }
            ],
        }


class _Client:
    def __init__(self, nodes: dict[int, _Node]) -> None:
        self.nodes = nodes

    def node(self, node_id: int) -> _Node:
        return self.nodes[node_id]


def test_identical_replicas_advance_to_the_smallest_hw() -> None:
    values = [b"a", b"b", b"c", b"d"]
    client = _Client({1: _Node(_log(values), 4), 2: _Node(_log(values), 3)})
    pc = PartitionCheck("t", 0, (1, 2), 0)
    assert verify_round(client, pc, 1 << 20, 0) == 3  # type: ignore[arg-type]
    assert pc.offset == 3 and pc.lag() == 1
    assert "max lag is 1 for partition [t,0] at offset 3 among 1 partitions" in report([pc])


def test_a_different_record_is_a_checksum_mismatch() -> None:
    client = _Client({1: _Node(_log([b"a", b"b"]), 2), 2: _Node(_log([b"a", b"X"]), 2)})
    pc = PartitionCheck("t", 0, (1, 2), 0)
    with pytest.raises(Mismatch, match=r"Partition \[t,0\] has unmatched checksum at offset 1"):
        verify_round(client, pc, 1 << 20, 0)  # type: ignore[arg-type]
    assert pc.offset == 1


def test_shifted_offsets_are_an_offset_mismatch() -> None:
    client = _Client({1: _Node(_log([b"a"]), 5), 2: _Node(_log([b"a"], base=1), 5)})
    with pytest.raises(Mismatch, match="replica 1's offset 0 doesn't match replica 2's offset 1"):
        verify_round(client, PartitionCheck("t", 0, (1, 2), 0), 1 << 20, 0)  # type: ignore[arg-type]
