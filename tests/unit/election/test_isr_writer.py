"""IsrWriter's /isr_change_notification: no recorded ISR change is left behind (a change made while a
notification create is out, or one whose create failed, goes out without waiting for another change)."""

from __future__ import annotations

import asyncio
from typing import Any

from kafkad.cluster.isr_writer import IsrWriter
from kafkad.replication.isr import LeaderAndIsr


class _Stat:
    def __init__(self, version: int) -> None:
        self.version = version


class _Zk:
    """The two ZkClient calls IsrWriter makes on success: set and create."""

    def __init__(self, fail_creates: int = 0) -> None:
        self.created: list[bytes] = []
        self.fail_creates = fail_creates
        self.create_started = asyncio.Event()
        self.release = asyncio.Event()
        self.release.set()

    async def set(self, path: str, data: bytes, version: int) -> _Stat:
        return _Stat(version + 1)

    async def create(self, path: str, data: bytes, **kwargs: Any) -> str:
        self.create_started.set()
        await self.release.wait()
        if self.fail_creates:
            self.fail_creates -= 1
            raise ConnectionError("connection loss")
        self.created.append(data)
        return path + "0000000001"


def _lai() -> LeaderAndIsr:
    return LeaderAndIsr(1, 3, (1, 2), 5, 7)


async def _until(cond: Any, timeout: float = 5.0) -> None:
    async with asyncio.timeout(timeout):
        while not cond():
            await asyncio.sleep(0.01)


def test_change_recorded_while_a_create_is_out_is_notified() -> None:
    async def go() -> None:
        zk = _Zk()
        zk.release.clear()
        writer = IsrWriter(zk, notify_delay_s=0.01)  # type: ignore[arg-type]
        assert await writer.update_isr("t", 0, _lai()) == 8
        await asyncio.wait_for(zk.create_started.wait(), 5)
        assert await writer.update_isr("t", 1, _lai()) == 8  # while the first create is out
        zk.release.set()
        await _until(lambda: len(zk.created) == 2)
        assert b'"partition":1' in zk.created[1].replace(b" ", b"")
        await writer.close()

    asyncio.run(go())


def test_failed_notification_is_retried() -> None:
    async def go() -> None:
        zk = _Zk(fail_creates=1)
        writer = IsrWriter(zk, notify_delay_s=0.01)  # type: ignore[arg-type]
        assert await writer.update_isr("t", 0, _lai()) == 8
        await _until(lambda: len(zk.created) == 1)
        await writer.close()

    asyncio.run(go())
