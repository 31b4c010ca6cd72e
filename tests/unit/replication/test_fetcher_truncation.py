"""A follower's truncation that fails on I/O takes that partition alone out (ReplicaManager.storage_failed
through the fetcher's on_storage_error hook); the partitions the same fetcher carries go on fetching."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from kafkad.protocol import ApiKey, RequestHeader, encode_response_bytes
from kafkad.replication.fetcher import FetcherConfig, ReplicaFetcher
from kafkad.replication.partition import Partition
from tests.unit.replication.test_partition import FakeLog


@dataclass
class _Epochs:
    latest_epoch: int = 5


@dataclass
class _Log(FakeLog):
    leader_epoch_cache: _Epochs = field(default_factory=_Epochs)
    broken: bool = False

    def truncate_to(self, offset: int) -> None:
        if self.broken:
            raise OSError(5, "Input/output error")
        self.log_end_offset = min(self.log_end_offset, offset)
        self.high_watermark = min(self.high_watermark, offset)


class _Channel:
    """The leader: OffsetForLeaderEpoch says epoch 5 ends at 50 (our logs end at 100); Fetch is empty."""

    client_id = "replica-fetcher-1-2"

    def __init__(self) -> None:
        self.fetched = asyncio.Event()

    async def request(self, api_key: int, api_version: int, body: Any) -> dict[str, Any]:
        if api_key == ApiKey.OFFSET_FOR_LEADER_EPOCH:
            return {
                "topics": [
                    {
                        "topic": t["topic"],
                        "partitions": [
                            {
                                "partition": p["partition"],
                                "error_code": 0,
                                "leader_epoch": 5,
                                "end_offset": 50,
                            }
                            for p in t["partitions"]
                        ],
                    }
                    for t in body["topics"]
                ]
            }
        self.fetched.set()
        await asyncio.sleep(0.05)  # the leader's long poll (max_wait_ms) with nothing to send
        return {"error_code": 0, "responses": []}

    async def request_raw(self, frame: Any) -> bytearray:
        await self.request(ApiKey.FETCH, 11, {})
        body = {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": []}
        return bytearray(encode_response_bytes(RequestHeader(ApiKey.FETCH, 11, 1, "leader"), body)[4:])

    def send_raw(self, frame: bytearray) -> None:
        return None  # as a channel not yet connected: the fetcher falls back to request_raw

    def close(self) -> None:
        pass


def test_failed_truncation_takes_one_partition_out_not_the_fetcher() -> None:
    async def go() -> None:
        fetcher = ReplicaFetcher(2, "127.0.0.1", 1, FetcherConfig(broker_id=1, backoff_ms=10), lambda: 0)
        channel = _Channel()
        fetcher.channel = channel  # type: ignore[assignment]
        failed: list[tuple[str, int]] = []

        def storage_error(topic: str, index: int, exc: BaseException) -> None:
            failed.append((topic, index))
            fetcher.remove([(topic, index)])  # what ReplicaManager.storage_failed leads to

        fetcher.on_storage_error = storage_error
        parts = []
        for i, broken in ((0, True), (1, False)):
            part = Partition(_Log(partition=i, log_end_offset=100, high_watermark=40, broken=broken), 1)
            part.become_follower(5, 2, (1, 2), isr=(1, 2))
            parts.append(part)
        fetcher.add(parts)
        try:
            await asyncio.wait_for(channel.fetched.wait(), 5)
        finally:
            await fetcher.stop()
        assert failed == [("t", 0)]
        assert parts[1].log_end_offset == 50  # truncated as the leader said
        assert list(fetcher.partitions) == [("t", 1)]

    asyncio.run(go())
