"""flush.messages=1 on a leader: the append starts the group commit's fsync (Partition.pending_sync) and the
high watermark (what acks=all answers and consumers wait for) stays at the recovery point until it is done.
Real ReplicaManager, LogManager, PartitionLog and LogSync; os.fdatasync is held (tests/unit/storage)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from kafkad.replication.manager import ReplicaManager
from tests.unit.storage.log_manager_support import batch, make
from tests.unit.storage.test_log_sync import HeldFdatasync


async def _wait_entered(held: HeldFdatasync) -> None:
    assert await asyncio.get_running_loop().run_in_executor(None, held.entered.wait, 30)


def test_the_hw_waits_for_the_leaders_fsync(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    held = HeldFdatasync(os.fdatasync, tmp_path)
    monkeypatch.setattr(os, "fdatasync", held)
    lm = make(tmp_path)
    replicas = ReplicaManager(lm, 0)
    replicas.create_topic("t", 1, {"flush.messages": "1"})
    replicas.create_topic("plain", 1)
    part, plain = replicas.get_or_raise("t", 0), replicas.get_or_raise("plain", 0)

    async def scenario() -> None:
        plain.append_as_leader(batch(2), now_ms=0, required_acks=-1)
        assert plain.pending_sync is None and plain.high_watermark == 2  # no flush settings: as before
        part.append_as_leader(batch(3), now_ms=0, required_acks=-1)
        sync = part.pending_sync
        assert sync is not None
        await _wait_entered(held)
        acked = asyncio.ensure_future(part.wait_replicated(2))
        await asyncio.sleep(0)
        assert part.high_watermark == 0 and not acked.done()  # the records are not on disk yet
        held.release()
        await sync
        assert part.high_watermark == 3
        await asyncio.wait_for(acked, 30)

    asyncio.run(scenario())
    lm.shutdown()
