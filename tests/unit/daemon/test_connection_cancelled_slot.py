"""A handler Task cancelled by someone other than the connection must not leave the connection mute."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from kafkad.network.connection import KafkaConnection
from kafkad.network.dispatcher import Dispatcher
from tests.unit.daemon.test_connection import FakeTransport, frame, settle


class _Dispatcher:
    def __init__(self) -> None:
        self.tasks: list[asyncio.Task[Any]] = []

    def dispatch(self, body: bytearray, peer: str) -> Any:
        if body == b"park":
            task = asyncio.get_running_loop().create_task(asyncio.sleep(3600, [b"never"]))
            self.tasks.append(task)
            return task
        return [bytes(body)]


def test_a_slot_cancelled_elsewhere_does_not_silence_the_connection() -> None:
    async def go() -> None:
        d = _Dispatcher()
        conn = KafkaConnection(cast(Dispatcher, d), max_request_bytes=1000, max_queued=100)
        t = FakeTransport()
        conn.connection_made(t)
        await settle()
        conn.data_received(frame(b"park"))
        await settle()
        d.tasks[0].cancel()  # e.g. LogGroupStore.close() cancelling the creation a handler awaits
        await settle()
        conn.data_received(frame(b"after"))
        await settle()
        # Either the next response is written or the connection is closed: never a silent hang.
        assert bytes(t.out) == b"after" or t.closed, "writer task died; the connection answers nothing"

    asyncio.run(go())
