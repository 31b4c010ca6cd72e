"""Zero-copy writes of FileSlice chunks with os.sendfile under uvloop (environment.md "Zero-copy").

uvloop has no loop.sendfile, so the writer calls os.sendfile on the transport's socket fd itself:
1. bytes already given to transport.write must leave first, or the stream interleaves: the owner
   (the connection) waits until the transport's write buffer is empty (`wait_flushed`);
2. os.sendfile until the slice is sent; on BlockingIOError wait for writability through
   loop.add_writer on a dup of the fd (the transport's own fd is registered with the loop already).
A short file (n == 0 before the end) means the slice no longer exists: the response is broken, so
the caller closes the connection.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from typing import Protocol


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
    ) -> None:
        self._loop = loop
        self._fd = sock_fd
        self._dup: int | None = None
        self._wait_flushed = wait_flushed
        self.bytes_sent = 0

    async def send(self, chunk: FileRange) -> None:
        await self._wait_flushed()
        offset, remaining = chunk.position, chunk.size
        while remaining > 0:
            try:
                n = os.sendfile(self._fd, chunk.fd, offset, remaining)
            except BlockingIOError:
                await self._writable()
                continue
            if n == 0:
                raise ConnectionError(f"file ended {remaining} bytes early (fd {chunk.fd} at {offset})")
            offset += n
            remaining -= n
            self.bytes_sent += n

    async def _writable(self) -> None:
        if self._dup is None:
            self._dup = os.dup(self._fd)
        fut: asyncio.Future[None] = self._loop.create_future()

        def ready() -> None:
            if not fut.done():
                fut.set_result(None)

        self._loop.add_writer(self._dup, ready)
        try:
            await fut
        finally:
            self._loop.remove_writer(self._dup)

    def close(self) -> None:
        if self._dup is not None:
            os.close(self._dup)
            self._dup = None
