"""A follower's first batches at a new leader epoch: the leader-epoch checkpoint they change is written on a
thread, not on the event loop (after a failover one Fetch answer brings a new epoch for every partition the
broker follows; 1,000 file rewrites on the loop held the follower for seconds while acks=all waited)."""

from __future__ import annotations

import asyncio
import struct
import threading
from pathlib import Path
from typing import Any, cast

import pytest

from kafkad.clock import ManualClock
from kafkad.protocol import ApiKey, RequestHeader, decode_request, encode_response_bytes
from kafkad.replication.fetcher import FetcherConfig, ReplicaFetcher
from kafkad.replication.partition import Partition
from kafkad.storage import checkpoints
from kafkad.storage.checkpoints import read_epochs
from kafkad.storage.log_config import LogConfig
from kafkad.storage.partition_log import PartitionLog
from tests.unit.storage.test_partition_log_helpers import make_batch

EPOCH = 3


def _batch_at_epoch(epoch: int) -> bytes:
    batch = make_batch(2)
    struct.pack_into(">i", batch, 12, epoch)  # partitionLeaderEpoch (outside the CRC, as a leader sets it)
    return bytes(batch)


class _Leader:
    """Answers the first Fetch with one batch of epoch EPOCH per partition asked for, then parks."""

    client_id = "replica-fetcher-1-2"

    def __init__(self) -> None:
        self.answered = asyncio.Event()

    async def request_raw(self, frame: bytearray) -> bytearray:
        if self.answered.is_set():
            await asyncio.Event().wait()
        body = decode_request(bytearray(frame[4:])).body
        responses = [
            {
                "topic": t["topic"],
                "partitions": [
                    {
                        "partition_index": p["partition"],
                        "error_code": 0,
                        "high_watermark": 0,
                        "log_start_offset": 0,
                        "records": _batch_at_epoch(EPOCH),
                    }
                    for p in t["partitions"]
                ],
            }
            for t in body["topics"]
        ]
        header = RequestHeader(ApiKey.FETCH, 11, 1, "leader")
        answer = {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": responses}
        self.answered.set()
        return bytearray(encode_response_bytes(header, answer)[4:])

    def send_raw(self, frame: bytearray) -> None:
        return None  # as a channel not yet connected: the fetcher falls back to request_raw

    def close(self) -> None:
        pass


def test_new_epoch_checkpoints_are_written_off_the_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    writers: list[threading.Thread] = []
    real = checkpoints.write_epochs

    def recording(*args: Any, **kwargs: Any) -> None:
        writers.append(threading.current_thread())
        real(*args, **kwargs)

    monkeypatch.setattr("kafkad.storage.leader_epoch.write_epochs", recording)
    logs = [
        PartitionLog.open(tmp_path / f"t-{i}", LogConfig(), ManualClock(), recover=False) for i in range(3)
    ]

    async def go() -> threading.Thread:
        loop_thread = threading.current_thread()
        fetcher = ReplicaFetcher(2, "127.0.0.1", 1, FetcherConfig(broker_id=1), lambda: 0)
        leader = _Leader()
        fetcher.channel = leader  # type: ignore[assignment]
        parts = []
        for plog in logs:
            part = Partition(cast(Any, plog), 1)
            part.become_follower(EPOCH, 2, (2, 1), isr=(2, 1))
            parts.append(part)
        fetcher.add(parts)
        for f in fetcher.partitions.values():
            f.truncating = False  # an empty log: nothing to truncate
        try:
            await asyncio.wait_for(leader.answered.wait(), 10)
            for _ in range(500):  # the checkpoints land once the executor ran (bounded wait)
                if all(read_epochs(p.directory / "leader-epoch-checkpoint") for p in logs):
                    break
                await asyncio.sleep(0.01)
        finally:
            await fetcher.stop()
        return loop_thread

    loop_thread = asyncio.run(go())
    assert all(plog.log_end_offset == 2 for plog in logs)
    assert [read_epochs(p.directory / "leader-epoch-checkpoint") for p in logs] == [[(EPOCH, 0)]] * 3
    assert writers and loop_thread not in writers, writers
    for plog in logs:
        plog.close()
