"""A transaction marker appended on a leader wakes its followers' parked Fetch requests, as a Produce does.

The coordinator's WriteTxnMarkers answers once the marker is replicated to the ISR; a follower whose Fetch
was parked on the leader (nothing new to read, replica.fetch.wait.max.ms 500) was woken only by a Produce
append, so each marker waited out that follower's max wait: 0.5 s per commit on an idle partition, seen in
issue 20's coordinator failover bench (markers of the loaded PrepareCommit landed 0.5 s after the load)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, cast

from kafkad.clock import ManualClock
from kafkad.replication.partition import Partition
from kafkad.storage.log_config import LogConfig
from kafkad.storage.partition_log import PartitionLog
from tests.unit.storage.test_transactions import txn_batch

PID = 1000


def test_a_marker_append_wakes_a_parked_follower_fetch(tmp_path: Path) -> None:
    plog = PartitionLog.open(tmp_path / "t-0", LogConfig(), ManualClock(), recover=False)

    async def go() -> bool:
        part = Partition(cast(Any, plog), 1)
        part.become_leader(1, (1, 2), (1, 2))
        plog.append(memoryview(txn_batch(PID, 0)), leader_epoch=1, now_ms=0)  # the transaction's data
        parked: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        part.add_append_waiter(parked)  # the follower's Fetch found nothing beyond its offset
        try:
            part.append_txn_marker(PID, 0, True, 0, now_ms=0)
            await asyncio.sleep(0)  # appends settle the waiter on the next iteration (delayed_fetch)
            return parked.done()
        finally:
            part.discard_append_waiter(parked)

    try:
        assert asyncio.run(go()), "the follower's parked Fetch was not woken by the marker"
    finally:
        plog.close()
