"""BrokerChannel against a real asyncio server on 127.0.0.1 speaking the Kafka wire (kafkad.protocol).

The server decodes each request frame and answers UpdateMetadata with error_code = the request's
controller_epoch, so every test can check that each caller got its own answer. Behaviours are switched per
test: answer in reverse order, hold answers back, close the connection after reading a request. Waits poll
conditions; the timeouts under test are set after the requests that must be pending when they fire are in
flight, so no sleep races a timeout.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import uvloop

from kafkad.protocol import decode_request, encode_response_bytes
from kafkad.replication.broker_channel import BrokerChannel
from kafkad.storage.records import SimpleRecord, build_batch

UPDATE_METADATA = 6
FETCH = 1


class WireServer:
    def __init__(self) -> None:
        self.mode = "answer"  # answer | reverse | hold | park-metadata | close | garbage
        self.batch = 1
        self.value = b"v"  # the fetched record's value
        self.connections = 0
        self.seen: list[int] = []
        self._server: asyncio.Server | None = None
        self.port = 0

    async def start(self, port: int = 0) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    def _answer(self, frame: bytearray) -> bytes:
        req = decode_request(frame)
        if req.header.api_key == FETCH:
            body: dict[str, Any] = {
                "responses": [
                    {
                        "topic": "t",
                        "partitions": [
                            {
                                "partition_index": 0,
                                "high_watermark": 3,
                                "records": build_batch([SimpleRecord(b"k", self.value, timestamp=1)]),
                            }
                        ],
                    }
                ]
            }
        else:
            body = {"error_code": req.body["controller_epoch"]}
        self.seen.append(req.header.correlation_id)
        return encode_response_bytes(req.header, body)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        held: list[bytes] = []
        parked: list[bytes] = []  # park-metadata: UpdateMetadata answers, written after a later answer
        try:
            while True:
                size = struct.unpack(">i", await reader.readexactly(4))[0]
                frame = bytearray(await reader.readexactly(size))
                if self.mode == "close":
                    writer.close()
                    return
                if self.mode == "garbage":  # the right correlation id, then bytes no schema accepts
                    cid = decode_request(frame).header.correlation_id
                    self.seen.append(cid)
                    writer.write(struct.pack(">ii", 12, cid) + b"\xff" * 8)
                    continue
                answer = self._answer(frame)
                if self.mode == "hold":
                    continue
                if self.mode == "park-metadata" and decode_request(frame).header.api_key == UPDATE_METADATA:
                    parked.append(answer)
                    continue
                held.append(answer)
                if self.mode == "reverse" and len(held) < self.batch:
                    continue
                for a in reversed(held) if self.mode == "reverse" else held:
                    writer.write(a)
                held.clear()
                if self.mode == "answer":
                    for a in parked:
                        writer.write(a)
                    parked.clear()
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            writer.close()


def run(test: Callable[[WireServer], Awaitable[None]]) -> None:
    """Run `test` on asyncio's loop and on uvloop's (the daemon's): their transports differ."""

    async def go() -> None:
        server = WireServer()
        await server.start()
        try:
            await asyncio.wait_for(test(server), 30)
        finally:
            server._server.close()  # type: ignore[union-attr]

    asyncio.run(go())
    uvloop.run(go())


def um(epoch: int) -> dict[str, Any]:
    return {"controller_id": 1, "controller_epoch": epoch, "broker_epoch": 5, "live_brokers": []}


def test_pipelined_requests_each_get_their_own_answer_even_out_of_order() -> None:
    async def t(server: WireServer) -> None:
        server.mode, server.batch = "reverse", 20
        ch = BrokerChannel("127.0.0.1", server.port, client_id="test")
        results = await asyncio.gather(*(ch.request(UPDATE_METADATA, 7, um(i)) for i in range(20)))
        assert [r["error_code"] for r in results] == list(range(20))
        assert server.connections == 1
        assert len(set(server.seen)) == 20
        ch.close()

    run(t)


def test_fetch_records_come_back_as_a_memoryview_of_the_batch() -> None:
    async def t(server: WireServer) -> None:
        ch = BrokerChannel("127.0.0.1", server.port, client_id="test")
        body = {
            "replica_id": 2,
            "max_wait_ms": 0,
            "min_bytes": 1,
            "topics": [{"topic": "t", "partitions": [{"partition": 0, "fetch_offset": 0}]}],
        }
        resp = await ch.request(FETCH, 11, body)
        recs = resp["responses"][0]["partitions"][0]["records"]
        assert bytes(recs) == build_batch([SimpleRecord(b"k", b"v", timestamp=1)])
        ch.close()

    run(t)


def test_connection_refused_raises_and_the_next_call_reconnects_after_backoff() -> None:
    async def t(server: WireServer) -> None:
        port = server.port
        await server.stop()
        ch = BrokerChannel("127.0.0.1", port, client_id="test", reconnect_backoff_ms=50)
        with pytest.raises(ConnectionError):
            await ch.request(UPDATE_METADATA, 7, um(1))
        with pytest.raises(ConnectionError):
            await ch.request(UPDATE_METADATA, 7, um(1))
        assert ch._failures == 2
        await server.start(port)
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        assert (await ch.request(UPDATE_METADATA, 7, um(3)))["error_code"] == 3
        assert loop.time() - t0 >= 0.05  # waited out the doubled backoff (100 ms, less elapsed time)
        ch.close()

    run(t)


def test_peer_closing_fails_pending_requests_and_the_next_request_reconnects() -> None:
    async def t(server: WireServer) -> None:
        ch = BrokerChannel("127.0.0.1", server.port, client_id="test", reconnect_backoff_ms=1)
        assert (await ch.request(UPDATE_METADATA, 7, um(1)))["error_code"] == 1
        server.mode = "close"
        with pytest.raises(ConnectionError):
            await ch.request(UPDATE_METADATA, 7, um(2))
        assert not ch.connected
        server.mode = "answer"
        assert (await ch.request(UPDATE_METADATA, 7, um(4)))["error_code"] == 4
        assert server.connections == 2
        ch.close()

    run(t)


def test_timeout_raises_closes_the_connection_and_fails_the_other_pending() -> None:
    async def t(server: WireServer) -> None:
        ch = BrokerChannel("127.0.0.1", server.port, client_id="test", request_timeout_ms=60_000)
        assert (await ch.request(UPDATE_METADATA, 7, um(0)))["error_code"] == 0  # connected
        server.mode = "hold"
        # The other request is in flight (its own timeout far away) before the one that times out is sent,
        # so it is pending on that connection whenever the timeout fires: no race with a sleep.
        other = asyncio.ensure_future(ch.request(UPDATE_METADATA, 7, um(2)))
        while len(server.seen) < 2:
            await asyncio.sleep(0.01)
        ch.request_timeout_ms = 200
        with pytest.raises(TimeoutError):
            await ch.request(UPDATE_METADATA, 7, um(1))
        with pytest.raises(ConnectionError):
            await other  # its connection was dropped with the first's timeout
        server.mode = "answer"
        assert (await ch.request(UPDATE_METADATA, 7, um(5)))["error_code"] == 5
        assert server.connections == 2
        ch.close()

    run(t)


def test_a_caller_cancelling_its_request_leaves_the_connection_and_others_alone() -> None:
    async def t(server: WireServer) -> None:
        server.mode, server.batch = "reverse", 2
        ch = BrokerChannel("127.0.0.1", server.port, client_id="test")
        first = asyncio.ensure_future(ch.request(UPDATE_METADATA, 7, um(1)))
        while not server.seen:
            await asyncio.sleep(0.01)
        first.cancel()
        assert (await ch.request(UPDATE_METADATA, 7, um(2)))["error_code"] == 2  # answered after first's
        assert first.cancelled()
        assert ch.connected and server.connections == 1
        ch.close()

    run(t)


def test_close_fails_pending_and_later_requests() -> None:
    async def t(server: WireServer) -> None:
        server.mode = "hold"
        ch = BrokerChannel("127.0.0.1", server.port, client_id="test")
        pending = asyncio.ensure_future(ch.request(UPDATE_METADATA, 7, um(1)))
        while not server.seen:
            await asyncio.sleep(0.01)
        ch.close()
        with pytest.raises(ConnectionError):
            await pending
        with pytest.raises(ConnectionError):
            await ch.request(UPDATE_METADATA, 7, um(2))

    run(t)


def test_concurrent_first_requests_share_one_connect() -> None:
    async def t(server: WireServer) -> None:
        ch = BrokerChannel("127.0.0.1", server.port, client_id="test")
        results = await asyncio.gather(*(ch.request(UPDATE_METADATA, 5, um(i)) for i in range(5)))
        assert sorted(r["error_code"] for r in results) == list(range(5))
        assert server.connections == 1
        ch.close()

    run(t)


def test_garbage_answer_fails_its_request_at_once_and_the_next_one_reconnects() -> None:
    """An answer the decoder refuses fails its request with ConnectionError now (it had left the pending
    table, so dropping the connection did not fail it: it waited for its timeout), and the channel goes on
    with a new connection."""

    async def t(server: WireServer) -> None:
        server.mode = "garbage"
        # A timeout far past run()'s 30 s bound: a request left waiting for it fails the test there.
        ch = BrokerChannel("127.0.0.1", server.port, client_id="test", request_timeout_ms=600_000)
        body = {"replica_id": 2, "max_wait_ms": 0, "min_bytes": 1, "topics": []}
        with pytest.raises(ConnectionError):
            await ch.request(FETCH, 11, body)
        assert not ch.connected
        server.mode = "answer"
        assert (await ch.request(UPDATE_METADATA, 7, um(6)))["error_code"] == 6
        assert server.connections == 2
        ch.close()

    run(t)


def fetch_frame() -> bytearray:
    from kafkad.protocol import RequestHeader, encode_request

    body = {"replica_id": 2, "max_wait_ms": 0, "min_bytes": 1, "topics": []}
    return bytearray(encode_request(RequestHeader(FETCH, 11, 0, "test"), body))


class _CountingReader:
    """The wire's frame reader, counting the reads the loop makes into it."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.reads = 0

    def get_buffer(self, sizehint: int = -1) -> memoryview:
        self.reads += 1
        buf: memoryview = self.inner.get_buffer(sizehint)
        return buf

    def buffer_updated(self, nbytes: int) -> Any:
        return self.inner.buffer_updated(nbytes)


@pytest.mark.parametrize("value_bytes", [16 << 10, 300 << 10])
def test_a_fetch_response_takes_one_read_and_large_ones_arrive_whole(value_bytes: int) -> None:
    """A 16 KiB response is read with its size prefix in one recv (FrameReader's exact-size buffers took
    three under uvloop: size, body, and an empty read after the full buffer; two under asyncio), and
    responses larger than the scratch still arrive byte for byte."""

    async def t(server: WireServer) -> None:
        server.value = bytes(range(256)) * (value_bytes // 256)
        ch = BrokerChannel("127.0.0.1", server.port, client_id="test")
        await ch.request_raw(fetch_frame())
        assert ch._wire is not None
        counter = ch._wire._reader = _CountingReader(ch._wire._reader)  # type: ignore[assignment]
        want = build_batch([SimpleRecord(b"k", server.value, timestamp=1)])
        n = 30
        for _ in range(n):
            frame = await ch.request_raw(fetch_frame())
            assert bytes(frame).endswith(want)
        if value_bytes < 64 << 10:
            assert counter.reads <= 1.5 * n, counter.reads
        ch.close()

    run(t)


def test_send_raw_answers_with_the_frame_and_times_out_through_the_watchdog() -> None:
    """send_raw: None until connected; then the response frame itself; an unanswered one fails with
    TimeoutError after request_timeout_ms (the channel's one watchdog timer) and takes the connection
    and the other pending requests with it."""

    async def t(server: WireServer) -> None:
        ch = BrokerChannel("127.0.0.1", server.port, client_id="test", request_timeout_ms=300)
        assert ch.send_raw(fetch_frame()) is None  # not connected yet: request_raw dials
        frame = await ch.request_raw(fetch_frame())
        assert int.from_bytes(frame[:4], "big") == server.seen[-1]  # from the correlation id on
        fut = ch.send_raw(fetch_frame())
        assert fut is not None
        answer = await fut
        assert int.from_bytes(answer[:4], "big") == server.seen[-1]
        server.mode = "hold"
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        held = ch.send_raw(fetch_frame())
        other = ch.send_raw(fetch_frame())  # pending beside it whenever the watchdog fires (no sleep between)
        assert held is not None and other is not None
        with pytest.raises(TimeoutError):
            await held  # a watchdog that never fires fails the test at run()'s 30 s bound
        assert loop.time() - t0 > 0.25  # not before its deadline
        with pytest.raises(ConnectionError):
            await other
        assert not ch.connected
        ch.close()

    run(t)


def test_watchdog_leaves_requests_with_their_own_timeout_alone() -> None:
    """A request() in flight (its own asyncio timeout) beside send_raw ones: the watchdog neither fails
    it nor re-arms for it, and it is answered."""

    async def t(server: WireServer) -> None:
        ch = BrokerChannel("127.0.0.1", server.port, client_id="test", request_timeout_ms=60_000)
        await ch.request_raw(fetch_frame())
        server.mode = "park-metadata"  # UpdateMetadata answers wait for the next request after "answer"
        slow = asyncio.ensure_future(ch.request(UPDATE_METADATA, 7, um(3)))  # its own timeout: 60 s
        while len(server.seen) < 2:
            await asyncio.sleep(0.01)
        ch.request_timeout_ms = 200
        fut = ch.send_raw(fetch_frame())  # arms the watchdog for 200 ms from now
        assert fut is not None
        await fut
        while ch._watchdog is not None:  # fires once; only `slow` (no deadline of its own) is pending
            await asyncio.sleep(0.01)
        assert not slow.done(), "the watchdog failed a request that has its own timeout"
        assert ch.connected
        server.mode = "answer"
        ch.request_timeout_ms = 60_000
        assert (await ch.request(UPDATE_METADATA, 7, um(4)))["error_code"] == 4
        assert (await slow)["error_code"] == 3
        ch.close()

    run(t)
