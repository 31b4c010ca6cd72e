"""A connection closing while the writer awaits a delayed response whose handler finishes anyway.

connection_lost cancels the handler Tasks and the writer, and drops every slot. Cancelling the writer while it
awaits a handler's Task only cancels that Task; a handler that returns normally despite the cancellation
(Python 3.11's asyncio.wait_for does when the cancellation lands after its inner future finished, as in an
acks=-1 produce or a group commit waiting for replication) resumed the writer, which popped the slot
connection_lost had already dropped: `IndexError: pop from an empty deque`, logged as "response writer failed".
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any, cast

import pytest

from kafkad.network.connection import KafkaConnection
from kafkad.network.dispatcher import Dispatcher
from tests.unit.daemon.test_connection import FakeTransport, frame, settle


class _ReplicationWait:
    """Each request waits (wait_for, like produce's acks=-1) on a future the test completes."""

    def __init__(self) -> None:
        self.replicated: list[asyncio.Future[None]] = []

    def dispatch(self, body: bytearray, peer: str) -> Any:
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()
        self.replicated.append(done)

        async def handler() -> list[bytes]:
            await asyncio.wait_for(done, 30)
            return [bytes(body)]

        return loop.create_task(handler())


class _SwallowsCancel:
    """A handler that answers even when cancelled (cleanup that returns instead of re-raising)."""

    def dispatch(self, body: bytearray, peer: str) -> Any:
        async def handler() -> list[bytes]:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.sleep(3600)
            return [bytes(body)]

        return asyncio.get_running_loop().create_task(handler())


@pytest.mark.parametrize("dispatcher", [_ReplicationWait, _SwallowsCancel])
def test_close_with_a_delayed_response_pending_leaves_no_writer_error(
    dispatcher: type[Any], caplog: pytest.LogCaptureFixture
) -> None:
    async def go() -> None:
        d = dispatcher()
        conn = KafkaConnection(cast(Dispatcher, d), max_request_bytes=1000, max_queued=100)
        t = FakeTransport()
        conn.connection_made(t)
        await settle()
        conn.data_received(frame(b"acks-all"))
        await settle()  # the writer now awaits the handler's Task
        if isinstance(d, _ReplicationWait):
            d.replicated[0].set_result(None)  # replicated just as the client goes away
        conn.connection_lost(ConnectionResetError())
        await settle()
        writer = conn._writer_task
        assert writer is not None and writer.done()
        assert bytes(t.out) == b"", "nothing may be written to a lost connection"
        assert conn.pending == 0

    with caplog.at_level(logging.INFO, logger="kafkad.network.connection"):
        asyncio.run(go())
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert not errors, [r.getMessage() for r in errors] + [str(r.exc_info) for r in errors]
