"""Zero-copy writes of FileSlice chunks with os.sendfile under uvloop (environment.md "Zero-copy").

uvloop has no loop.sendfile, so the writer calls os.sendfile on the transport's socket fd itself:
1. bytes already given to transport.write must leave first, or the stream interleaves: the owner
   (the connection) waits until the transport's write buffer is empty (`wait_flushed`);
2. os.sendfile straight away, in a loop, until the slice is sent or the socket is full (EAGAIN);
3. on EAGAIN the rest of the slice is pumped from a writability callback (loop.add_writer on a dup of
   the fd: the transport's own fd is registered with the loop already). The callback calls os.sendfile
   itself and stays registered until the slice is done, so a slice costs one add/remove pair and one
   task wake-up however many times the socket fills, instead of one of each per EAGAIN.
On the first slice over TCP the socket's send buffer is raised to `SNDBUF` (the kernel doubles it):
sendfile's skbs only reference page-cache pages, and a buffer that holds a whole fetch response lets
one sendfile call move it, where the default autotuned buffer needs several EAGAIN round trips.
The bytes just before a slice (a Fetch response's headers) may be given to `send` as `head`: over TCP they
are sent with MSG_MORE, so the kernel holds them until sendfile's last piece pushes head and records out
together. Written on their own, they left as a packet of their own that woke the peer for a partial frame
(a follower read each response in two wake-ups and two recvs; on loopback the sender also runs the
receiver's softirq and wake-up once more per response).
A short file (n == 0 before the end) means the slice no longer exists: the response is broken, so
the caller closes the connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol

Bytes = bytes | bytearray | memoryview
_HEAD_PARTS = 64  # more chunks than this in a head are joined first
SNDBUF = 4 << 20  # SO_SNDBUF for sockets that carry sendfile data (capped by net.core.wmem_max)


class FileRange(Protocol):
    @property
    def fd(self) -> int: ...
    @property
    def position(self) -> int: ...
    @property
    def size(self) -> int: ...


class SendfileWriter:
    """Runs on the event loop; one per connection; one send at a time (the connection's writer)."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        sock_fd: int,
        wait_flushed: Callable[[], Awaitable[None]],
        *,
        sndbuf: int | None = SNDBUF,
        write: Callable[[Sequence[Bytes]], None] | None = None,
    ) -> None:
        self._loop = loop
        self._fd = sock_fd
        self._dup: int | None = None
        self._wait_flushed = wait_flushed
        self._write = write  # the transport's writelines: a head the socket did not take at once
        self._sndbuf = sndbuf
        self._tuned = False
        self._more = 0  # MSG_MORE once the socket is known to be TCP (_tune)
        self._sock: socket.socket | None = None  # on a dup of the fd: sendmsg with flags
        self.bytes_sent = 0
        # The slice being pumped by the writability callback: file fd, next offset, end offset.
        self._src = -1
        self._offset = 0
        self._end = 0
        self._done: asyncio.Future[None] | None = None

    async def send(self, chunk: FileRange, head: Sequence[Bytes] = ()) -> None:
        """Send `head` (bytes that go just before the slice) and then the slice."""
        await self._wait_flushed()
        if not self._tuned:
            self._tune()
        src, offset = chunk.fd, chunk.position
        end = offset + chunk.size
        if head:
            await self._send_head(head, end > offset)
        offset = self._send_until_full(src, offset, end)
        if offset < end:
            await self._pump(src, offset, end)

    def _send_until_full(self, src: int, offset: int, end: int) -> int:
        """sendfile [offset, end) until done or the socket buffer is full; returns where it stopped."""
        out, start = self._fd, offset
        try:
            while offset < end:
                n = os.sendfile(out, src, offset, end - offset)
                if n == 0:
                    raise ConnectionError(f"file ended {end - offset} bytes early (fd {src} at {offset})")
                offset += n
        except BlockingIOError:
            pass
        finally:
            self.bytes_sent += offset - start
        return offset

    async def _send_head(self, head: Sequence[Bytes], more: bool) -> None:
        """`head` onto the socket, held back (MSG_MORE) for the slice when `more` and over TCP."""
        sent, sock = 0, self._sock
        if len(head) > _HEAD_PARTS:  # sendmsg takes at most IOV_MAX buffers
            head = [b"".join(head)]
        if sock is not None:
            with contextlib.suppress(BlockingIOError):
                sent = sock.sendmsg(head, (), self._more if more else 0)
        if sent == sum(map(len, head)):  # the usual case: no copy of the head
            return
        rest = b"".join(head)[sent:]
        # The socket took part or none of it (full; or no socket object): the transport queues the rest.
        if self._write is None:
            raise ConnectionError("the socket is full and there is no transport to queue on")
        self._write([rest])
        await self._wait_flushed()

    async def _pump(self, src: int, offset: int, end: int) -> None:
        """Send [offset, end) of src from the writability callback; returns when all of it is sent."""
        if self._dup is None:  # the socket object's fd when there is one: one dup per connection
            self._dup = self._sock.fileno() if self._sock is not None else os.dup(self._fd)
        self._src, self._offset, self._end = src, offset, end
        done: asyncio.Future[None] = self._loop.create_future()
        self._done = done
        self._loop.add_writer(self._dup, self._on_writable)
        try:
            await done
        finally:
            self._loop.remove_writer(self._dup)
            self._done = None

    def _on_writable(self) -> None:
        done = self._done
        if done is None or done.done():
            return
        end = self._end
        try:
            self._offset = offset = self._send_until_full(self._src, self._offset, end)
        except OSError as e:  # ConnectionError included: the awaiting send() raises it
            done.set_exception(e)
            return
        if offset >= end:
            done.set_result(None)

    def _tune(self) -> None:
        """Once: a socket object on a dup of the fd (sendmsg with flags); over TCP, MSG_MORE for heads and
        SO_SNDBUF raised (a Unix socket's buffer means something else)."""
        self._tuned = True
        with contextlib.suppress(OSError):
            self._sock = s = socket.socket(fileno=os.dup(self._fd))
            if s.family not in (socket.AF_INET, socket.AF_INET6):
                return
            self._more = socket.MSG_MORE
            if self._sndbuf is not None and s.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF) < self._sndbuf:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self._sndbuf)

    def close(self) -> None:
        if self._sock is not None:
            if self._dup == self._sock.fileno():
                self._dup = None
            self._sock.close()
            self._sock = None
        if self._dup is not None:
            os.close(self._dup)
            self._dup = None
