"""Follower fetch fairness: a partition that returned records moves to the end of the fetcher's next Fetch
(Kafka's PartitionStates.updateAndMoveToEnd). The fake leader below fills its response with the first
partition asked for, as a leader whose max_bytes is reached after one partition; with a fixed request order
the other partitions would never be fetched."""

from __future__ import annotations

import asyncio
import struct

from kafkad.protocol import ApiKey, RequestHeader, decode_request, encode_response_bytes
from kafkad.replication.fetcher import FetcherConfig, ReplicaFetcher
from kafkad.replication.partition import Partition
from tests.unit.replication.test_partition import FakeLog

# What the fetcher's _whole_batches takes for one batch: base offset, length 4, 4 bytes (FakeLog counts bytes).
BATCH = struct.pack(">qi", 0, 4) + b"abcd"


class _Leader:
    client_id = "replica-fetcher-1-2"

    def __init__(self, fetches: int) -> None:
        self.orders: list[list[tuple[str, int]]] = []
        self.fetches = fetches
        self.done = asyncio.Event()

    async def request_raw(self, frame: bytearray) -> bytearray:
        if self.done.is_set():
            await asyncio.Event().wait()  # enough fetches: park until the fetcher stops
        body = decode_request(bytearray(frame[4:])).body
        order = [(t["topic"], p["partition"]) for t in body["topics"] for p in t["partitions"]]
        self.orders.append(order)
        if len(self.orders) >= self.fetches:
            self.done.set()
        await asyncio.sleep(0)
        responses = []
        for i, t in enumerate(body["topics"]):
            parts = [
                {
                    "partition_index": p["partition"],
                    "error_code": 0,
                    "high_watermark": 0,
                    "log_start_offset": 0,
                    "records": BATCH if (i, j) == (0, 0) else b"",  # max_bytes reached after one
                }
                for j, p in enumerate(t["partitions"])
            ]
            responses.append({"topic": t["topic"], "partitions": parts})
        header = RequestHeader(ApiKey.FETCH, 11, 1, "leader")
        body = {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": responses}
        return bytearray(encode_response_bytes(header, body)[4:])

    def send_raw(self, frame: bytearray) -> None:
        return None  # as a channel not yet connected: the fetcher falls back to request_raw

    def close(self) -> None:
        pass


def test_every_partition_is_served_when_max_bytes_cuts_the_response() -> None:
    async def go() -> list[list[tuple[str, int]]]:
        fetcher = ReplicaFetcher(2, "127.0.0.1", 1, FetcherConfig(broker_id=1), lambda: 0)
        leader = _Leader(fetches=8)
        fetcher.channel = leader  # type: ignore[assignment]
        parts = []
        for topic, index in (("a", 0), ("a", 1), ("b", 0), ("b", 1)):
            part = Partition(FakeLog(topic=topic, partition=index), 1)
            part.become_follower(5, 2, (1, 2), isr=(1, 2))
            parts.append(part)
        fetcher.add(parts)
        for f in fetcher.partitions.values():
            f.truncating = False  # nothing to truncate: fetch right away
        try:
            await asyncio.wait_for(leader.done.wait(), 10)
        finally:
            await fetcher.stop()
        served = {(p.topic, p.index): p.log_end_offset // len(BATCH) for p in parts}
        assert served == {("a", 0): 2, ("a", 1): 2, ("b", 0): 2, ("b", 1): 2}, leader.orders
        return leader.orders

    orders = asyncio.run(go())
    assert orders[1] == [("a", 1), ("b", 0), ("b", 1), ("a", 0)]  # the served one went last
