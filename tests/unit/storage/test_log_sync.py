"""Group commit (storage/log_sync.py) over real PartitionLogs: appends that arrive while an fsync runs share
the next one, a waiter completes only once its offset is fsynced, partitions of one log dir are synced by
one job, and a failed fsync fails its waiters and takes the partition offline (ReplicaManager).

The only stand-in is os.fdatasync wrapped to count calls, hold the first one, or fail (the OS, not ours).
"""

from __future__ import annotations

import asyncio
import errno
import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from kafkad.clock import ManualClock
from kafkad.protocol.errors import ErrorCode, KafkaError
from kafkad.replication.manager import ReplicaManager
from kafkad.storage.log_config import LogConfig
from kafkad.storage.log_sync import LogSync
from kafkad.storage.partition_log import PartitionLog
from tests.unit.storage.log_manager_support import batch, make


class HeldFdatasync:
    """os.fdatasync of files under `root`, counted; the first call waits until `release()` (it tells
    `entered` first). Other files (a thread another test left running) pass straight through."""

    def __init__(self, real: Callable[[int], None], root: Path) -> None:
        self.real = real
        self.root = str(root)
        self.calls = 0
        self.entered = threading.Event()
        self.gate = threading.Event()

    def __call__(self, fd: int) -> None:
        if not os.readlink(f"/proc/self/fd/{fd}").startswith(self.root):
            self.real(fd)
            return
        if not self.entered.is_set():
            self.entered.set()
            assert self.gate.wait(30), "the test never released the first fdatasync"
        self.real(fd)
        self.calls += 1

    def release(self) -> None:
        self.gate.set()


def _log(tmp_path: Path, name: str = "t-0") -> PartitionLog:
    config = LogConfig().with_overrides({"flush.messages": "1"})
    return PartitionLog.open(tmp_path / "d" / name, config, ManualClock(), recover=False)


def _append(plog: PartitionLog) -> int:
    """One single-record batch; returns the offset after it."""
    plog.append(batch(1), leader_epoch=0, now_ms=0)
    return plog.log_end_offset


def _record(seen: dict[int, int], offset: int, held: HeldFdatasync) -> Callable[[object], None]:
    def done(_fut: object) -> None:
        seen.setdefault(offset, held.calls)

    return done


async def _wait_entered(held: HeldFdatasync) -> None:
    assert await asyncio.get_running_loop().run_in_executor(None, held.entered.wait, 30)


def test_appends_during_an_fsync_share_the_next_one_and_wait_for_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    held = HeldFdatasync(os.fdatasync, tmp_path)
    monkeypatch.setattr(os, "fdatasync", held)
    plog = _log(tmp_path)
    sync = LogSync()
    seen: dict[int, int] = {}  # offset -> fdatasync calls done when its waiter completed

    async def scenario() -> None:
        futures = {}
        end = _append(plog)
        futures[end] = sync.request(plog, end)
        await _wait_entered(held)  # the first job is inside its fdatasync, which covers offset 0 only
        for _ in range(4):
            end = _append(plog)
            futures[end] = sync.request(plog, end)
        for offset, fut in futures.items():
            assert fut is not None
            fut.add_done_callback(_record(seen, offset, held))
        await asyncio.sleep(0)
        assert not any(f.done() for f in futures.values() if f is not None)
        assert plog.recovery_point == 0  # nothing advanced past data not yet fsynced
        held.release()
        await asyncio.gather(*(f for f in futures.values() if f is not None))

    asyncio.run(scenario())
    # One fdatasync for the first append, ONE more for the four that came in while it ran.
    assert held.calls == 2
    assert seen == {1: 1, 2: 2, 3: 2, 4: 2, 5: 2}
    assert plog.recovery_point == 5
    assert (sync.stats.jobs, sync.stats.fsyncs, sync.stats.records) == (2, 2, 5)
    plog.close()


def test_an_offset_already_synced_needs_no_wait(tmp_path: Path) -> None:
    plog = _log(tmp_path)
    sync = LogSync()

    async def scenario() -> None:
        end = _append(plog)
        fut = sync.request(plog, end)
        assert fut is not None
        await fut
        assert sync.request(plog, end) is None

    asyncio.run(scenario())
    assert plog.recovery_point == 1
    plog.close()


def test_partitions_of_one_log_dir_are_synced_by_one_job(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    held = HeldFdatasync(os.fdatasync, tmp_path)
    monkeypatch.setattr(os, "fdatasync", held)
    first, logs = _log(tmp_path, "a-0"), [_log(tmp_path, f"b-{i}") for i in range(3)]
    sync = LogSync()

    async def scenario() -> None:
        f0 = sync.request(first, _append(first))
        await _wait_entered(held)
        waits = [sync.request(plog, _append(plog)) for plog in logs]
        held.release()
        await asyncio.gather(*(f for f in (f0, *waits) if f is not None))

    asyncio.run(scenario())
    assert sync.stats.jobs == 2  # the three logs that asked during the first job: one job between them
    assert sync.stats.fsyncs == 4
    assert all(plog.recovery_point == 1 for plog in (first, *logs))
    for plog in (first, *logs):
        plog.close()


def test_a_failed_fsync_fails_its_waiters_and_takes_the_partition_offline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lm = make(tmp_path)
    replicas = ReplicaManager(lm, 0)
    replicas.create_topic("t", 1, {"flush.messages": "1"})
    replicas.create_topic("u", 1, {"flush.messages": "1"})
    part, other = replicas.get_or_raise("t", 0), replicas.get_or_raise("u", 0)
    real = os.fdatasync
    bad_fds: set[int] = set()

    def fdatasync(fd: int) -> None:
        if fd in bad_fds:
            raise OSError(errno.EIO, "Input/output error")
        real(fd)

    monkeypatch.setattr(os, "fdatasync", fdatasync)
    bad_fds.add(part.log.active_segment._fd)  # type: ignore[attr-defined]

    async def scenario() -> tuple[BaseException | None, BaseException | None]:
        part.append_as_leader(batch(1), now_ms=0, required_acks=1)
        other.append_as_leader(batch(1), now_ms=0, required_acks=1)
        failed = replicas.log_sync.request(part.log, 1)  # type: ignore[arg-type]
        fine = replicas.log_sync.request(other.log, 1)  # type: ignore[arg-type]
        assert failed is not None and fine is not None
        results = await asyncio.gather(failed, fine, return_exceptions=True)
        return results[0], results[1]

    error, ok = asyncio.run(scenario())
    assert isinstance(error, KafkaError) and error.code is ErrorCode.KAFKA_STORAGE_ERROR
    assert ok is None
    assert replicas.is_offline("t", 0) and part.offline
    assert part.log.recovery_point == 0  # type: ignore[attr-defined]
    assert not replicas.is_offline("u", 0) and other.log.recovery_point == 1  # type: ignore[attr-defined]
    lm.shutdown()


def test_a_truncation_during_the_fsync_keeps_the_recovery_point(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A follower truncated (and appended anew) while its fsync ran: the fsync covered the old bytes,
    so the recovery point must not move over the new ones; their waiter gets the next fsync."""
    held = HeldFdatasync(os.fdatasync, tmp_path)
    monkeypatch.setattr(os, "fdatasync", held)
    plog = _log(tmp_path)
    for _ in range(3):
        _append(plog)
    sync = LogSync()

    async def scenario() -> None:
        first = sync.request(plog, 3)
        await _wait_entered(held)
        plog.truncate_to(1)
        _append(plog)
        _append(plog)  # offsets 1 and 2 again, not fsynced
        again = sync.request(plog, 3)
        assert first is not None and again is not None
        done = asyncio.gather(first, again)
        held.release()
        await done

    asyncio.run(scenario())
    assert held.calls == 2  # the second waiter was not answered by the fsync of the replaced bytes
    assert plog.recovery_point == 3
    plog.close()
