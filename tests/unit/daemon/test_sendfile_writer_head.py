"""SendfileWriter's head: the bytes before a slice leave with it (MSG_MORE over TCP), or through the
transport when the socket cannot take them."""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Sequence
from pathlib import Path

import uvloop

from kafkad.network.sendfile_writer import SendfileWriter
from kafkad.storage.file_slice import FileSlice


async def _noop() -> None:
    return None


def _tcp_pair() -> tuple[socket.socket, socket.socket]:
    with socket.create_server(("127.0.0.1", 0)) as server:
        a = socket.create_connection(server.getsockname())
        b, _ = server.accept()
    a.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as connection.py: nothing else holds bytes
    a.setblocking(False)
    b.setblocking(False)
    return a, b


def _segment(tmp_path: Path, size: int) -> tuple[bytes, int]:
    """Random bytes in a file, and a read fd on it (the caller closes it)."""
    data = os.urandom(size)
    path = tmp_path / "seg.log"
    path.write_bytes(data)
    return data, os.open(path, os.O_RDONLY)


def _readable(s: socket.socket) -> bytes:
    try:
        return s.recv(1 << 20)
    except BlockingIOError:
        return b""


async def _read_into(received: bytearray, s: socket.socket, want: int) -> None:
    loop = asyncio.get_running_loop()
    while len(received) < want:
        chunk = await loop.sock_recv(s, 65536)
        assert chunk
        received.extend(chunk)


def test_head_is_held_for_the_slice_over_tcp(tmp_path: Path) -> None:
    data, fd = _segment(tmp_path, 20000)
    a, b = _tcp_pair()
    head = [b"size", bytearray(b"header"), memoryview(b"partition")]

    async def go() -> tuple[bytes, bytes]:
        writer = SendfileWriter(asyncio.get_running_loop(), a.fileno(), _noop)
        writer._tune()
        await writer._send_head(head, True)  # the head alone: held back, not on the wire
        await asyncio.sleep(0.05)  # what a peer would see had the head been pushed (loopback: at once)
        early = _readable(b)
        await writer.send(FileSlice(fd, 100, 5000))  # the slice pushes head and records out together
        received = bytearray()
        for _ in range(200):
            received += _readable(b)
            if len(received) >= 19 + 5000:
                break
            await asyncio.sleep(0.01)
        writer.close()
        return early, bytes(received)

    try:
        early, got = uvloop.run(go())
    finally:
        os.close(fd)
        a.close()
        b.close()
    assert early == b""
    assert got == b"sizeheaderpartition" + data[100:5100]


def test_send_with_head_over_tcp_arrives_in_order(tmp_path: Path) -> None:
    data, fd = _segment(tmp_path, 300000)
    a, b = _tcp_pair()

    async def go() -> bytes:
        loop = asyncio.get_running_loop()
        writer = SendfileWriter(loop, a.fileno(), _noop)
        received = bytearray()
        task = loop.create_task(_read_into(received, b, 3 + 250000 + 2 + 0 + 4 + 1000))
        await writer.send(FileSlice(fd, 0, 250000), [b"one"])
        await writer.send(FileSlice(fd, 0, 0), [b"tw"])  # an empty slice: the head alone, pushed
        await writer.send(FileSlice(fd, 1000, 1000), [b"th", b"ree"])
        await asyncio.wait_for(task, 30)
        writer.close()
        return bytes(received)

    try:
        got = uvloop.run(go())
    finally:
        os.close(fd)
        a.close()
        b.close()
    assert got == b"one" + data[:250000] + b"tw" + b"three" + data[1000:2000]


def test_a_head_the_socket_cannot_take_goes_through_the_transport(tmp_path: Path) -> None:
    _, fd = _segment(tmp_path, 4096)
    a, b = socket.socketpair()
    a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 16384)
    a.setblocking(False)
    b.setblocking(False)
    while True:  # fill the socket: the head cannot be sent at all
        try:
            a.send(b"\0" * 4096)
        except BlockingIOError:
            break
    queued: list[bytes] = []
    flushed: list[int] = []

    def write(parts: Sequence[bytes | bytearray | memoryview]) -> None:
        queued.extend(bytes(p) for p in parts)

    async def wait_flushed() -> None:
        flushed.append(len(queued))
        while queued and _readable(b):  # the transport empties its buffer as the peer reads
            await asyncio.sleep(0)

    async def go() -> None:
        writer = SendfileWriter(asyncio.get_running_loop(), a.fileno(), wait_flushed, write=write)
        await writer.send(FileSlice(fd, 0, 4096), [b"he", b"ad"])
        writer.close()

    try:
        uvloop.run(asyncio.wait_for(go(), 30))
    finally:
        os.close(fd)
        a.close()
        b.close()
    assert queued == [b"head"]
    assert flushed == [0, 1]  # waited once before the head and once after queueing it (before the slice)
