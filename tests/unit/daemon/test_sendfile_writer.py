"""SendfileWriter over a real socketpair: large slices through a small socket buffer (EAGAIN path)."""

from __future__ import annotations

import asyncio
import os
import socket
from pathlib import Path

import pytest
import uvloop

from kafkad.network.sendfile_writer import SendfileWriter
from kafkad.storage.file_slice import FileSlice


async def _noop() -> None:
    return None


def small_buffer_pair(*, reader_blocking: bool = False) -> tuple[socket.socket, socket.socket]:
    """A socketpair whose writing end is non-blocking with a 16 KiB send buffer: large slices hit EAGAIN."""
    a, b = socket.socketpair()
    a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 16384)
    a.setblocking(False)
    b.setblocking(reader_blocking)
    return a, b


def test_sendfile_slices_arrive_whole_and_in_order(tmp_path: Path) -> None:
    data = os.urandom(3 << 20)
    path = tmp_path / "seg.log"
    path.write_bytes(data)
    fd = os.open(path, os.O_RDONLY)
    a, b = small_buffer_pair()

    async def go() -> bytes:
        loop = asyncio.get_running_loop()
        writer = SendfileWriter(loop, a.fileno(), _noop)
        received = bytearray()

        async def reader() -> None:
            want = len(data) - 1000 + 5000
            while len(received) < want:
                chunk = await loop.sock_recv(b, 65536)
                assert chunk
                received.extend(chunk)

        task = loop.create_task(reader())
        await writer.send(FileSlice(fd, 1000, len(data) - 1000))  # far more than the socket buffer
        await writer.send(FileSlice(fd, 0, 5000))
        await asyncio.wait_for(task, 30)
        writer.close()
        assert writer.bytes_sent == len(data) - 1000 + 5000
        return bytes(received)

    try:
        got = uvloop.run(go())
    finally:
        os.close(fd)
        a.close()
        b.close()
    assert got == data[1000:] + data[:5000]


def test_short_file_raises(tmp_path: Path) -> None:
    path = tmp_path / "short.log"
    path.write_bytes(b"x" * 10)
    fd = os.open(path, os.O_RDONLY)
    a, b = socket.socketpair()
    a.setblocking(False)

    async def go() -> None:
        writer = SendfileWriter(asyncio.get_running_loop(), a.fileno(), _noop)
        await writer.send(FileSlice(fd, 0, 100))

    try:
        with pytest.raises(ConnectionError, match="ended 90 bytes early"):
            uvloop.run(go())
    finally:
        os.close(fd)
        a.close()
        b.close()
