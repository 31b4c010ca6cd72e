"""The cheap per-request path: eager handlers in the Dispatcher, direct writes in KafkaConnection."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Mapping
from typing import Any, cast

from kafkad.api.broker import Broker
from kafkad.network.dispatcher import Dispatcher
from kafkad.network.registry import HandlerRegistry, HandlerSpec, RequestContext
from kafkad.protocol import (
    ApiKey,
    ErrorCode,
    KafkaError,
    Request,
    RequestHeader,
    decode_response,
    encode_request,
)
from tests.unit.daemon.test_connection import frame, make, settle

# --- Dispatcher ---------------------------------------------------------------------------------


def _heartbeat_frame(corr: int, member: str) -> bytearray:
    body = {"group_id": "g", "generation_id": 1, "member_id": member, "group_instance_id": None}
    return bytearray(encode_request(RequestHeader(ApiKey.HEARTBEAT, 3, corr, "c"), body)[4:])


def _decode(chunks: Any) -> tuple[int, dict[str, Any]]:
    assert isinstance(chunks, list) and len(chunks) == 1
    return decode_response(ApiKey.HEARTBEAT, 3, chunks[0][4:])


class _Handlers:
    """Heartbeat handler: member "sync" answers at once, "wait" after `gate`, "fail" raises after it."""

    def __init__(self) -> None:
        self.gate: asyncio.Future[None] | None = None
        self.cancelled = False

    async def handle(self, ctx: RequestContext, request: Request) -> Mapping[str, Any]:
        member = request.body["member_id"]
        if member != "sync":
            self.gate = asyncio.get_running_loop().create_future()
            try:
                await self.gate
            except asyncio.CancelledError:
                self.cancelled = True
                raise
            if member == "fail":
                raise KafkaError(ErrorCode.REBALANCE_IN_PROGRESS, "rebalancing")
        return {"throttle_time_ms": 0, "error_code": 0}


def _dispatcher() -> tuple[Dispatcher, _Handlers, list[int]]:
    h = _Handlers()
    reg = HandlerRegistry()
    reg.add(HandlerSpec(ApiKey.HEARTBEAT, 0, 3, h.handle))
    recorded: list[int] = []
    d = Dispatcher(cast(Broker, object()), reg, on_request=lambda key, _s: recorded.append(key))
    return d, h, recorded


def test_handler_that_never_waits_answers_without_a_task() -> None:
    async def go() -> None:
        d, _h, recorded = _dispatcher()
        out = d.dispatch(_heartbeat_frame(7, "sync"), "peer")
        assert not isinstance(out, asyncio.Task)
        assert _decode(out) == (7, {"throttle_time_ms": 0, "error_code": 0})
        assert recorded == [ApiKey.HEARTBEAT]

    asyncio.run(go())


def test_handler_that_waits_finishes_in_a_task() -> None:
    async def go() -> None:
        d, h, recorded = _dispatcher()
        out = d.dispatch(_heartbeat_frame(8, "wait"), "peer")
        assert isinstance(out, asyncio.Task)
        await settle()
        assert not out.done() and recorded == []
        assert h.gate is not None
        h.gate.set_result(None)
        assert _decode(await out) == (8, {"throttle_time_ms": 0, "error_code": 0})
        # an error raised after the first wait still becomes the error body
        out = d.dispatch(_heartbeat_frame(9, "fail"), "peer")
        assert isinstance(out, asyncio.Task)
        await settle()
        h.gate.set_result(None)
        corr, body = _decode(await out)
        assert (corr, body["error_code"]) == (9, ErrorCode.REBALANCE_IN_PROGRESS)
        assert recorded == [ApiKey.HEARTBEAT, ApiKey.HEARTBEAT]

    asyncio.run(go())


def test_cancelling_the_task_cancels_the_half_run_handler() -> None:
    async def go() -> None:
        d, h, _ = _dispatcher()
        out = d.dispatch(_heartbeat_frame(10, "wait"), "peer")
        assert isinstance(out, asyncio.Task)
        await settle()
        out.cancel()
        await settle()
        assert out.cancelled() and h.cancelled

    asyncio.run(go())


# --- KafkaConnection ----------------------------------------------------------------------------


class _CountingWrites:
    def __init__(self) -> None:
        self.calls = 0


def test_ready_responses_leave_in_one_write_during_data_received() -> None:
    async def go() -> None:
        conn, t, _d = make()
        await settle()  # the writer parks: the fast path is open
        writes = _CountingWrites()
        plain_write = t.write

        def counting(data: Any) -> None:
            writes.calls += 1
            plain_write(data)

        t.write = counting  # type: ignore[method-assign]
        conn.data_received(frame(b"one") + frame(b"none") + frame(b"two"))
        assert bytes(t.out) == b"onetwo"  # no loop turn needed
        assert writes.calls == 1 and conn.pending == 0

    asyncio.run(go())


def test_ready_response_behind_a_slow_one_waits_its_turn() -> None:
    async def go() -> None:
        conn, t, d = make()
        await settle()
        conn.data_received(frame(b"fast1") + frame(b"slow1") + frame(b"fast2"))
        assert bytes(t.out) == b"fast1"
        conn.data_received(frame(b"fast3"))
        assert bytes(t.out) == b"fast1"
        d.gates[b"slow1"].set_result(None)
        await settle()
        assert bytes(t.out) == b"fast1slow1fast2fast3"
        conn.data_received(frame(b"fast4"))  # queue drained, writer parked again: direct
        assert bytes(t.out) == b"fast1slow1fast2fast3fast4"

    asyncio.run(go())


def test_close_request_flushes_earlier_answers_first() -> None:
    async def go() -> None:
        conn, t, _d = make()
        await settle()
        conn.data_received(frame(b"ok") + frame(b"bad") + frame(b"after"))
        assert t.closed
        assert bytes(t.out) == b"ok"

    asyncio.run(go())


def test_whole_frames_then_a_partial_one_in_the_same_chunk() -> None:
    async def go() -> None:
        conn, t, d = make(max_bytes=1000)
        await settle()
        data = frame(b"one") + frame(b"two") + frame(b"three")
        conn.data_received(data[:-3])  # "thr" of the last body, size prefix complete
        assert bytes(t.out) == b"onetwo"
        conn.data_received(data[-3:] + frame(b"x")[:2])  # rest of it, half a size prefix
        conn.data_received(frame(b"x")[2:] + struct.pack(">i", 1001))  # then an oversize frame
        assert [bytes(f) for f in d.frames] == [b"one", b"two", b"three", b"x"]
        assert bytes(t.out) == b"onetwothreex" and t.closed

    asyncio.run(go())
