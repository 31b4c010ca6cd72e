"""Framing, ordering and close behaviour of KafkaConnection with a fake transport (no sockets)."""

import asyncio
import struct
from typing import Any, cast

import pytest

from kafkad.network.connection import KafkaConnection
from kafkad.network.dispatcher import CloseConnection, Dispatcher


class FakeTransport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.out = bytearray()
        self.closed = False
        self.paused = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 5555) if name == "peername" else default

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def get_write_buffer_size(self) -> int:
        return 0

    def write(self, data: Any) -> None:
        self.out += data

    def close(self) -> None:
        self.closed = True

    def pause_reading(self) -> None:
        self.paused = True

    def resume_reading(self) -> None:
        self.paused = False


class EchoDispatcher:
    """Answers frame b"slow:N" after the test releases gate N; b"bad" closes; b"none" answers nothing."""

    def __init__(self) -> None:
        self.frames: list[bytearray] = []
        self.gates: dict[bytes, asyncio.Future[None]] = {}

    def dispatch(self, frame: bytearray, peer: str) -> Any:
        self.frames.append(frame)
        if frame == b"bad":
            raise CloseConnection("malformed")
        if frame == b"none":
            return None
        if frame.startswith(b"slow"):
            gate = asyncio.get_running_loop().create_future()
            self.gates[bytes(frame)] = gate

            async def later() -> list[bytes]:
                await gate
                return [bytes(frame)]

            return asyncio.get_running_loop().create_task(later())
        return [bytes(frame)]


def frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def make(
    max_bytes: int = 1000, max_queued: int = 100
) -> tuple[KafkaConnection, FakeTransport, EchoDispatcher]:
    d = EchoDispatcher()
    conn = KafkaConnection(cast(Dispatcher, d), max_request_bytes=max_bytes, max_queued=max_queued)
    t = FakeTransport()
    conn.connection_made(t)
    return conn, t, d


def test_frames_split_and_coalesced() -> None:
    async def go() -> None:
        conn, t, d = make()
        data = frame(b"one") + frame(b"two") + frame(b"")
        for i in range(len(data)):  # one byte at a time
            conn.data_received(data[i : i + 1])
        conn.data_received(frame(b"three") + frame(b"four"))
        await settle()
        assert [bytes(f) for f in d.frames] == [b"one", b"two", b"", b"three", b"four"]
        assert all(isinstance(f, bytearray) for f in d.frames)
        assert bytes(t.out) == b"onetwothreefour"
        assert not t.closed

    asyncio.run(go())


def test_responses_in_request_order() -> None:
    async def go() -> None:
        conn, t, d = make()
        conn.data_received(frame(b"slow1") + frame(b"fast") + frame(b"none") + frame(b"slow2"))
        await settle()
        assert bytes(t.out) == b""  # fast waits behind slow1
        d.gates[b"slow2"].set_result(None)
        await settle()
        assert bytes(t.out) == b""
        d.gates[b"slow1"].set_result(None)
        await settle()
        assert bytes(t.out) == b"slow1fastslow2"
        assert conn.pending == 0

    asyncio.run(go())


def test_oversize_negative_and_http_close() -> None:
    async def go() -> None:
        for prefix in (struct.pack(">i", 1001), struct.pack(">i", -1), b"GET / HTTP/1.1\r\n\r\n"):
            conn, t, d = make(max_bytes=1000)
            conn.data_received(prefix)
            assert t.closed, prefix
            assert d.frames == []
        conn, t, d = make(max_bytes=1000)
        conn.data_received(frame(b"x" * 1000))
        assert not t.closed and len(d.frames) == 1

    asyncio.run(go())


def test_malformed_frame_closes_and_stops_reading() -> None:
    async def go() -> None:
        conn, t, d = make()
        conn.data_received(frame(b"ok") + frame(b"bad") + frame(b"after"))
        assert t.closed
        assert [bytes(f) for f in d.frames] == [b"ok", b"bad"]

    asyncio.run(go())


def test_backpressure_pauses_and_resumes_reading() -> None:
    async def go() -> None:
        conn, t, d = make(max_queued=4)
        conn.data_received(b"".join(frame(b"slow%d" % i) for i in range(4)))
        assert t.paused
        for i in range(4):
            d.gates[b"slow%d" % i].set_result(None)
        await settle()
        assert not t.paused
        assert bytes(t.out) == b"slow0slow1slow2slow3"

    asyncio.run(go())


def test_connection_lost_cancels_pending() -> None:
    async def go() -> None:
        conn, _t, _d = make()
        conn.data_received(frame(b"slow9"))
        await settle()
        conn.connection_lost(None)
        await settle()
        assert conn.pending == 0

    asyncio.run(go())


def test_idle_since_ignores_in_flight_requests() -> None:
    async def go() -> None:
        conn, _t, d = make()
        conn.data_received(frame(b"slow1"))
        base = conn.last_active
        assert conn.idle_since(base + 100) == 0.0  # a parked request (long poll) is not idleness
        d.gates[b"slow1"].set_result(None)
        await settle()
        assert conn.idle_since(base + 100) == pytest.approx(100)

    asyncio.run(go())


def test_copy_path_reads_cold_pieces_off_the_event_loop(tmp_path: Any, monkeypatch: Any) -> None:
    """TLS has no sendfile: a file slice is read and written. Pieces the page cache holds are read on the
    loop (preadv2 RWF_NOWAIT); a piece it does not hold (the file's pages dropped with
    POSIX_FADV_DONTNEED) is read in the executor: a disk read must not stall every connection."""
    import os
    import threading

    from kafkad.storage.file_slice import FileSlice

    data = os.urandom((2 << 20) + 300)
    path = tmp_path / "segment.log"
    path.write_bytes(data)
    fd = os.open(path, os.O_RDONLY)
    executor_reads: list[tuple[int, bool]] = []
    real_pread = os.pread

    def pread(f: int, n: int, pos: int) -> bytes:  # the real read, noting the thread it ran on
        executor_reads.append((pos, threading.current_thread() is threading.main_thread()))
        return real_pread(f, n, pos)

    monkeypatch.setattr("kafkad.network.connection.os.pread", pread)

    class SliceDispatcher(EchoDispatcher):
        def dispatch(self, frame: bytearray, peer: str) -> Any:
            return [b"head", FileSlice(fd, 0, len(data)), FileSlice(fd, 10, 100)]

    async def serve() -> bytes:
        d = SliceDispatcher()
        conn = KafkaConnection(cast(Dispatcher, d), max_request_bytes=1000, max_queued=100, tls=True)
        t = FakeTransport()
        conn.connection_made(t)
        conn.data_received(frame(b"fetch"))
        want = 4 + len(data) + 100
        for _ in range(1000):
            if len(t.out) >= want:
                break
            await asyncio.sleep(0.01)
        return bytes(t.out)

    try:
        hot = asyncio.run(serve())  # just written: in the page cache
        assert executor_reads == []
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        cold = asyncio.run(serve())
    finally:
        os.close(fd)
    assert hot == cold == b"head" + data + data[10:110]
    assert executor_reads and executor_reads[0] == (0, False)  # the first piece, off the loop's thread
    assert all(not on_loop for _, on_loop in executor_reads)
