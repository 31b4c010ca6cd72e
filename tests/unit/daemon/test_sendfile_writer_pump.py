"""SendfileWriter's EAGAIN pump and socket tuning: send buffer raised on TCP only, the writability
callback unregistered after a slice, after a cancel and after a peer reset."""

from __future__ import annotations

import asyncio
import os
import socket
from pathlib import Path

import pytest
import uvloop

from kafkad.network.sendfile_writer import SNDBUF, SendfileWriter
from kafkad.storage.file_slice import FileSlice
from tests.unit.daemon.test_sendfile_writer import small_buffer_pair


async def _noop() -> None:
    return None


def _file(tmp_path: Path, size: int) -> tuple[int, bytes]:
    data = os.urandom(size)
    path = tmp_path / "seg.log"
    path.write_bytes(data)
    return os.open(path, os.O_RDONLY), data


def _tcp_pair() -> tuple[socket.socket, socket.socket]:
    with socket.create_server(("127.0.0.1", 0)) as srv:
        a = socket.create_connection(srv.getsockname())
        b, _ = srv.accept()
    return a, b


def test_tcp_send_buffer_raised_and_unix_left_alone(tmp_path: Path) -> None:
    fd, data = _file(tmp_path, 1000)
    a, b = _tcp_pair()
    u, v = socket.socketpair()
    for s in (a, u):
        s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 16384)
        s.setblocking(False)
    unix_before = u.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF)

    async def go() -> None:
        loop = asyncio.get_running_loop()
        for s in (a, u):
            w = SendfileWriter(loop, s.fileno(), _noop)
            await w.send(FileSlice(fd, 0, len(data)))
            w.close()

    try:
        uvloop.run(go())
        assert a.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF) >= min(SNDBUF, 1 << 20)
        assert u.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF) == unix_before
        assert b.recv(2000) == data
        assert v.recv(2000) == data
    finally:
        os.close(fd)
        for s in (a, b, u, v):
            s.close()


def test_writer_unregistered_after_pumped_slice_and_after_cancel(tmp_path: Path) -> None:
    fd, data = _file(tmp_path, 2 << 20)
    a, b = small_buffer_pair()

    async def go() -> None:
        loop = asyncio.get_running_loop()
        writer = SendfileWriter(loop, a.fileno(), _noop, sndbuf=None)
        received = bytearray()

        async def reader(want: int) -> None:
            while len(received) < want:
                received.extend(await loop.sock_recv(b, 65536))

        task = loop.create_task(reader(len(data)))
        await writer.send(FileSlice(fd, 0, len(data)))
        await task
        assert bytes(received) == data
        assert writer._dup is not None  # the EAGAIN path ran
        assert not loop.remove_writer(writer._dup)  # nothing left registered
        # Nobody reads now: the send parks in the pump; cancelling it must unregister too.
        stuck = loop.create_task(writer.send(FileSlice(fd, 0, len(data))))
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert not stuck.done()
        stuck.cancel()
        with pytest.raises(asyncio.CancelledError):
            await stuck
        assert not loop.remove_writer(writer._dup)
        writer.close()

    try:
        uvloop.run(go())
    finally:
        os.close(fd)
        a.close()
        b.close()


def test_peer_reset_during_pump_raises(tmp_path: Path) -> None:
    fd, data = _file(tmp_path, 2 << 20)
    a, b = small_buffer_pair(reader_blocking=True)

    async def go() -> None:
        loop = asyncio.get_running_loop()
        writer = SendfileWriter(loop, a.fileno(), _noop, sndbuf=None)
        sending = loop.create_task(writer.send(FileSlice(fd, 0, len(data))))
        await asyncio.sleep(0)
        assert not sending.done()
        b.close()
        try:
            with pytest.raises(OSError):
                await asyncio.wait_for(sending, 30)
        finally:
            writer.close()

    try:
        uvloop.run(go())
    finally:
        os.close(fd)
        a.close()
