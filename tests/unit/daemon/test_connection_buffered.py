"""KafkaConnection as a BufferedProtocol: reads through get_buffer/buffer_updated, like uvloop does them."""

from __future__ import annotations

import asyncio
import struct
from typing import Any, cast

from kafkad.network.connection import KafkaConnection, ReceiveScratch
from kafkad.network.dispatcher import Dispatcher
from tests.unit.daemon.test_connection import EchoDispatcher, FakeTransport, frame, settle


def feed(conn: KafkaConnection, data: bytes, max_read: int = 1 << 30) -> list[bool]:
    """Deliver `data` as a kernel would: into whatever get_buffer hands out, at most `max_read` per read.
    Returns, per read, whether the buffer was outside the connection's scratch (a direct body read)."""
    direct = []
    pos = 0
    while pos < len(data):
        buf = conn.get_buffer(-1)
        assert len(buf) > 0
        n = min(len(buf), len(data) - pos, max_read)
        buf[:n] = data[pos : pos + n]
        direct.append(buf.obj is not conn._scratch.obj)
        del buf  # the loop releases its view before buffer_updated
        conn.buffer_updated(n)
        pos += n
    return direct


def make(
    max_bytes: int = 1 << 20, scratch: ReceiveScratch | None = None, max_queued: int = 100
) -> tuple[KafkaConnection, FakeTransport, EchoDispatcher]:
    d = EchoDispatcher()
    conn = KafkaConnection(
        cast(Dispatcher, d), max_request_bytes=max_bytes, max_queued=max_queued, scratch=scratch
    )
    t = FakeTransport()
    conn.connection_made(t)
    return conn, t, d


def test_many_frames_in_one_read_and_frames_split_across_reads() -> None:
    async def go() -> None:
        conn, t, d = make(scratch=ReceiveScratch(64))
        bodies = [b"a" * n for n in (0, 1, 3, 4, 5, 50, 59, 60, 61, 200)]
        data = b"".join(frame(b) for b in bodies)
        for max_read in (1, 3, 7, 64):
            d.frames.clear()
            t.out.clear()
            feed(conn, data, max_read)
            await settle()
            assert [bytes(f) for f in d.frames] == bodies, max_read
            assert bytes(t.out) == b"".join(bodies)
        assert not t.closed

    asyncio.run(go())


def test_huge_frame_is_received_straight_into_its_body() -> None:
    async def go() -> None:
        conn, _t, d = make(scratch=ReceiveScratch(4096))
        big = bytes(range(256)) * 1200  # 300 KiB, far beyond the scratch
        direct = feed(conn, frame(big) + frame(b"after"), max_read=100_000)
        assert direct[0] is False  # the size prefix and the first bytes arrive in the scratch
        assert any(direct)  # then the rest lands in the body itself
        assert [bytes(f) for f in d.frames] == [big, b"after"]
        assert isinstance(d.frames[0], bytearray)

    asyncio.run(go())


def test_size_limit_applies_before_any_body_is_allocated() -> None:
    async def go() -> None:
        conn, t, d = make(max_bytes=100_000, scratch=ReceiveScratch(4096))
        feed(conn, frame(b"x" * 100_000))
        assert not t.closed and len(d.frames) == 1
        feed(conn, struct.pack(">i", 100_001) + b"y" * 10)
        assert t.closed and len(d.frames) == 1
        conn2, t2, _ = make(scratch=ReceiveScratch(4096))
        feed(conn2, b"GET / HTTP/1.1\r\n\r\n")
        assert t2.closed

    asyncio.run(go())


def test_connections_sharing_a_scratch_keep_their_own_partial_frames() -> None:
    async def go() -> None:
        shared = ReceiveScratch(32)
        a, ta, da = make(scratch=shared)
        b, tb, db = make(scratch=shared)
        fa = frame(b"A" * 40) + frame(b"a2")
        fb = frame(b"B" * 25) + frame(b"b2")
        # interleave reads of the two connections through the one buffer
        for i in range(0, max(len(fa), len(fb)), 9):
            if i < len(fa):
                feed(a, fa[i : i + 9])
            if i < len(fb):
                feed(b, fb[i : i + 9])
        await settle()
        assert [bytes(f) for f in da.frames] == [b"A" * 40, b"a2"]
        assert [bytes(f) for f in db.frames] == [b"B" * 25, b"b2"]
        assert bytes(ta.out) == b"A" * 40 + b"a2" and bytes(tb.out) == b"B" * 25 + b"b2"

    asyncio.run(go())


class _CountingTransport(FakeTransport):
    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def write(self, data: Any) -> None:
        self.calls += 1
        self.out += data

    def writelines(self, list_of_data: Any) -> None:
        self.calls += 1
        for d in list_of_data:
            self.out += d


def test_writer_sends_responses_completed_behind_a_slow_one_in_one_write() -> None:
    async def go() -> None:
        d = EchoDispatcher()
        conn = KafkaConnection(cast(Dispatcher, d), max_request_bytes=1000, max_queued=100)
        t = _CountingTransport()
        conn.connection_made(t)
        await settle()
        feed(conn, frame(b"slow1") + frame(b"f1") + frame(b"none") + frame(b"slow2") + frame(b"f2"))
        d.gates[b"slow2"].set_result(None)  # complete, but behind slow1
        await settle()
        assert t.calls == 0
        d.gates[b"slow1"].set_result(None)
        await settle()
        assert bytes(t.out) == b"slow1f1slow2f2"
        assert t.calls == 1
        assert conn.pending == 0

    asyncio.run(go())


def test_acks0_style_none_responses_write_nothing() -> None:
    async def go() -> None:
        conn, t, d = make()
        await settle()
        feed(conn, frame(b"none") * 3)
        await settle()
        assert len(d.frames) == 3 and bytes(t.out) == b"" and not t.closed

    asyncio.run(go())
