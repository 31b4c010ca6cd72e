"""A follower whose leader answers UNKNOWN_LEADER_EPOCH (the leader has not applied the LeaderAndIsr that
gave the follower its epoch yet; the controller sends both at once) asks again within milliseconds instead
of setting the partition aside for replica.fetch.backoff.ms; other errors still wait the backoff."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kafkad.protocol import ApiKey, ErrorCode, RequestHeader, encode_response_bytes
from kafkad.replication.fetcher import FetcherConfig, ReplicaFetcher
from kafkad.replication.partition import Partition
from tests.unit.replication.test_fetcher_truncation import _Log

BACKOFF_MS = 60_000  # a backoff no test waits out: progress below comes from the short retry alone


class _Leader:
    """Answers OffsetForLeaderEpoch with `first_error` `times` times, then epoch 5 ending at 100."""

    client_id = "replica-fetcher-1-2"

    def __init__(self, first_error: ErrorCode, times: int) -> None:
        self.first_error, self.times = first_error, times
        self.asked = 0
        self.fetched = asyncio.Event()

    async def request(self, api_key: int, api_version: int, body: Any) -> dict[str, Any]:
        assert api_key == ApiKey.OFFSET_FOR_LEADER_EPOCH
        self.asked += 1
        code = self.first_error if self.asked <= self.times else ErrorCode.NONE
        return {
            "topics": [
                {
                    "topic": t["topic"],
                    "partitions": [
                        {
                            "partition": p["partition"],
                            "error_code": int(code),
                            "leader_epoch": 5,
                            "end_offset": 100,
                        }
                        for p in t["partitions"]
                    ],
                }
                for t in body["topics"]
            ]
        }

    async def request_raw(self, frame: Any) -> bytearray:
        self.fetched.set()
        await asyncio.sleep(0.05)  # the leader's long poll with nothing to send
        body = {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": []}
        return bytearray(encode_response_bytes(RequestHeader(ApiKey.FETCH, 11, 1, "leader"), body)[4:])

    def send_raw(self, frame: bytearray) -> None:
        return None

    def close(self) -> None:
        pass


async def _follow(leader: _Leader, wait_s: float) -> bool:
    fetcher = ReplicaFetcher(2, "127.0.0.1", 1, FetcherConfig(broker_id=1, backoff_ms=BACKOFF_MS), lambda: 0)
    fetcher.channel = leader  # type: ignore[assignment]
    part = Partition(_Log(log_end_offset=100, high_watermark=100), 1)
    part.become_follower(5, 2, (2, 1), isr=(2, 1))
    fetcher.add([part])
    try:
        await asyncio.wait_for(leader.fetched.wait(), wait_s)
        return True
    except TimeoutError:
        return False
    finally:
        await fetcher.stop()


def test_a_leader_behind_our_epoch_is_asked_again_soon() -> None:
    leader = _Leader(ErrorCode.UNKNOWN_LEADER_EPOCH, times=3)
    assert asyncio.run(_follow(leader, 10)), "the follower never fetched after UNKNOWN_LEADER_EPOCH"
    assert leader.asked == 4


@pytest.mark.parametrize("code", [ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.NOT_LEADER_OR_FOLLOWER])
def test_other_leader_errors_still_wait_the_backoff(code: ErrorCode) -> None:
    leader = _Leader(code, times=1)
    assert not asyncio.run(_follow(leader, 0.5))  # set aside for BACKOFF_MS: no Fetch meanwhile
    assert leader.asked == 1
