"""The leader's per-follower and per-produce bookkeeping: a timed-out acks=all wait leaves nothing behind in
the partition, and a follower's fetch offset moves its position only when a read would accept it (a Fetch
whose max_bytes was used up by an earlier partition still checks the offset, as Kafka's readFromLocalLog)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from kafkad.protocol import ErrorCode
from kafkad.replication.partition import Partition
from tests.unit.daemon.test_handlers import batch, call, create, fetch_body, make_broker
from tests.unit.replication.test_partition import FakeLog


def test_timed_out_acks_all_waits_are_forgotten() -> None:
    async def go() -> Partition:
        p = Partition(FakeLog(), broker_id=1)
        p.become_leader(3, isr=[1, 2], replicas=[1, 2])
        for _ in range(50):
            p.append_as_leader(memoryview(b"ab"), now_ms=0, required_acks=-1)
            with pytest.raises(TimeoutError):  # follower 2 never fetches
                await asyncio.wait_for(p.wait_replicated(p.log_end_offset - 1), 0.001)
        return p

    p = asyncio.run(go())
    assert p._hw_waiters == []


def test_follower_offset_past_the_end_does_not_move_it_when_max_bytes_is_used_up(tmp_path: Path) -> None:
    b = make_broker(tmp_path)
    create(b, "a")
    create(b, "b")
    for topic in ("a", "b"):
        part = b.replicas.get_or_raise(topic, 0)
        part.append_as_leader(batch(b"x" * 200), now_ms=0, required_acks=1)
        part.become_leader(1, isr=[0], replicas=[0, 2])
    body = fetch_body("a", 0, max_bytes=10)  # the first batch of a-0 uses the whole budget
    body["replica_id"] = 2
    body["topics"].append(
        {
            "topic": "b",
            "partitions": [
                {"partition": 0, "fetch_offset": 5, "log_start_offset": -1, "partition_max_bytes": 1 << 20}
            ],
        }
    )
    out = call(b, 1, 11, body)
    a, bp = (t["partitions"][0] for t in out["responses"])
    assert a["error_code"] == 0 and a["records"]
    assert bp["error_code"] == ErrorCode.OFFSET_OUT_OF_RANGE  # b-0 ends at 1
    assert b.replicas.get_or_raise("a", 0).follower_leo(2) == 0
    assert b.replicas.get_or_raise("b", 0).follower_leo(2) == -1  # was 5: a log end it never had
