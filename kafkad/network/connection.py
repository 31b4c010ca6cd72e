"""One client connection: length-prefixed framing, pipelined requests, responses in request order.

asyncio.BufferedProtocol (not streams) for speed: the kernel writes received bytes straight into a
buffer of ours, no bytes object per read. Two receive buffers:
* a scratch buffer (`ReceiveScratch`, one per listener, shared by its connections) for ordinary reads:
  every frame complete in it is copied once into its own bytearray (the codec hands out writable
  memoryviews into that), and whatever is left of a partial frame is copied into the connection's
  framing state before buffer_updated returns, so the scratch never holds anyone's data between reads;
* the body of a big partial frame itself: while at least `_DIRECT_MIN` bytes of a body are missing,
  get_buffer hands out the rest of that bytearray, so a large produce request lands in its final place
  with one copy (kernel -> body) and no zero-filled intermediate.
Framing is a two-state machine: 4 size bytes, then a body bytearray of exactly that size. A size that is
negative or above socket.request.max.bytes (e.g. 1195725856 = "GET ") closes this connection only.

Each decoded request gets a slot in a FIFO; a single writer task awaits the slots in order, so responses
leave in request order however the handlers interleave. Fast path: a response that is ready at once
(the dispatcher ran its handler eagerly) while nothing is queued ahead of it and the writer is idle is
written straight from buffer_updated, with the other ready responses of the same received chunk, in one
transport write: no slot, no writer wake-up, one send per chunk of pipelined requests. The writer task
likewise gathers the bytes of every consecutive slot already complete into one writelines. FileSlice
chunks go through SendfileWriter after the transport buffer has drained (detected by lowering the write
buffer high-water mark to 0 and waiting for resume_writing). Reading pauses while too many requests are
queued or the peer stops reading its responses.

On a TLS transport there is no sendfile (the bytes must be encrypted): FileSlice chunks are read in 1 MiB
pieces and written to the transport (the copy path), honouring its flow control. A piece the page cache holds
is read on the event loop (preadv2 RWF_NOWAIT never waits for the disk); one it does not is read in the
executor, so a cold read never stalls the loop. On TLS
and SASL listeners the "dispatcher" is the connection's security Session (kafkad.security.session),
which gates and labels requests before handing them to the real Dispatcher.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import errno
import logging
import os
import socket
import struct
import time
from typing import Any, cast

from kafkad.network.dispatcher import CloseConnection, Dispatcher, Outcome
from kafkad.network.sendfile_writer import SendfileWriter

log = logging.getLogger(__name__)

_HIGH_WATER = 4 << 20  # transport buffer above which we stop reading until the peer catches up
SCRATCH_BYTES = 256 << 10  # one read's worth: many pipelined frames per recv
_DIRECT_MIN = 64 << 10  # a body missing at least this much is received straight into itself
_COPY_PIECE = 1 << 20  # TLS copy path: bytes of a file slice read and written at a time
_RWF_NOWAIT: int | None = getattr(os, "RWF_NOWAIT", None)


def _cached_read(fd: int, n: int, pos: int) -> bytes | memoryview:
    """Up to `n` bytes at `pos` if the page cache has them (preadv2 RWF_NOWAIT: never waits for the disk),
    else b"" (also where RWF_NOWAIT is missing): the caller reads them in the executor."""
    if _RWF_NOWAIT is None:
        return b""
    buf = bytearray(n)
    try:
        got = os.preadv(fd, [buf], pos, _RWF_NOWAIT)
    except BlockingIOError:  # EAGAIN: the first page is not cached
        return b""
    except OSError as e:
        if e.errno in (errno.EOPNOTSUPP, errno.EINVAL):  # a file system without RWF_NOWAIT reads
            return b""
        raise
    return memoryview(buf)[:got] if got else b""


_unpack_size = struct.Struct(">i").unpack_from
_BYTES = (bytes, bytearray, memoryview)


class ReceiveScratch:
    """The receive buffer the connections of one event loop share (see the module docstring): a read
    is fully consumed before the loop runs anything else, so one buffer serves them all."""

    __slots__ = ("buf", "view")

    def __init__(self, size: int = SCRATCH_BYTES) -> None:
        self.buf = bytearray(size)
        self.view = memoryview(self.buf)


class KafkaConnection(asyncio.BufferedProtocol):
    def __init__(
        self,
        dispatcher: Dispatcher,
        *,
        max_request_bytes: int,
        max_queued: int,
        on_close: Any = None,
        scratch: ReceiveScratch | None = None,
        session: Any = None,
        tls: bool = False,
    ) -> None:
        # A security session (TLS/SASL listeners) stands in for the dispatcher: same dispatch signature.
        self._dispatcher: Dispatcher = session if session is not None else dispatcher
        self._session = session
        self._tls = tls
        self._scratch = (scratch or ReceiveScratch(16 << 10)).view
        self._direct = False  # the last get_buffer handed out the partial body, not the scratch
        self._max_request = max_request_bytes
        self._max_queued = max_queued
        self._on_close = on_close
        self._transport: asyncio.Transport | None = None
        self.peer = "?"
        # framing state
        self._head = bytearray()
        self._body: bytearray | None = None
        self._filled = 0
        # response ordering
        self._slots: collections.deque[Outcome | asyncio.Task[Outcome]] = collections.deque()
        self._wakeup: asyncio.Future[None] | None = None
        self._writer_task: asyncio.Task[None] | None = None
        self._writer_idle = False  # parked on _wakeup with nothing in hand
        self._ready: list[bytes | bytearray | memoryview] = []  # fast-path output of this data_received
        self._sendfile: SendfileWriter | None = None
        self._write_paused = False
        self._drain_waiters: list[asyncio.Future[None]] = []
        self._reading_paused = False
        self._closing = False
        self.requests = 0
        self.last_active = time.monotonic()  # connections.max.idle.ms sweep (Server)

    # --- asyncio.Protocol ----------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's TCPTransport is not an asyncio.Transport subclass, but has its interface.
        self._transport = cast(asyncio.Transport, transport)
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        self._transport.set_write_buffer_limits(high=_HIGH_WATER)
        sock = transport.get_extra_info("socket")
        loop = asyncio.get_running_loop()
        if sock is not None:
            with contextlib.suppress(OSError, AttributeError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if not self._tls:
                self._sendfile = SendfileWriter(
                    loop, sock.fileno(), self._wait_flushed, write=self._transport.writelines
                )
        if self._session is not None:
            self._session.connection_made(transport)
        self._writer_task = loop.create_task(self._writer())

    def get_buffer(self, sizehint: int) -> memoryview:
        body = self._body
        if body is not None and len(body) - self._filled >= _DIRECT_MIN:
            self._direct = True
            return memoryview(body)[self._filled :]
        self._direct = False
        return self._scratch

    def buffer_updated(self, nbytes: int) -> None:
        if not self._direct:
            self._received(self._scratch[:nbytes])
            return
        if self._closing:
            return
        self.last_active = time.monotonic()
        self._filled += nbytes
        body = self._body
        assert body is not None
        if self._filled == len(body):
            self._body = None
            self._request(body)
            if self._ready:
                self._flush_ready()

    def data_received(self, data: bytes) -> None:
        """Bytes that did not come through get_buffer (tests; a transport without buffer support)."""
        self._received(memoryview(data))

    def _received(self, view: memoryview) -> None:
        """Frame `view` (consumed entirely: nothing may point into it afterwards)."""
        if self._closing:
            return
        self.last_active = time.monotonic()
        try:
            if self._body is None and not self._head:
                # Fast path: whole frames at the start of the chunk, one copy each into their body.
                pos, end_of_data, limit = 0, len(view), self._max_request
                while end_of_data - pos >= 4:
                    size = _unpack_size(view, pos)[0]
                    end = pos + 4 + size
                    if size < 0 or size > limit or end > end_of_data:
                        break  # the general path below closes, or keeps the partial frame
                    self._request(bytearray(view[pos + 4 : end]))
                    pos = end
                    if self._closing:
                        return
                if pos:
                    view = view[pos:]
            while view:
                if self._body is None:
                    need = 4 - len(self._head)
                    self._head += view[:need]
                    view = view[need:]
                    if len(self._head) < 4:
                        return
                    size = int.from_bytes(self._head, "big", signed=True)
                    self._head.clear()
                    if size < 0 or size > self._max_request:
                        log.info(
                            "%s: request size %d outside [0, %d] (%r): closing connection",
                            self.peer,
                            size,
                            self._max_request,
                            size.to_bytes(4, "big", signed=True),
                        )
                        self._close()
                        return
                    self._body = bytearray(size)
                    self._filled = 0
                body = self._body
                take = min(len(view), len(body) - self._filled)
                body[self._filled : self._filled + take] = view[:take]
                self._filled += take
                view = view[take:]
                if self._filled == len(body):
                    self._body = None
                    self._request(body)
                    if self._closing:
                        return
        finally:
            view.release()
            if self._ready:
                self._flush_ready()

    def eof_received(self) -> bool | None:
        return False  # close our side too; pending responses are dropped like Kafka does

    def connection_lost(self, exc: Exception | None) -> None:
        self._closing = True
        for slot in self._slots:
            if isinstance(slot, asyncio.Task):
                slot.cancel()
        self._slots.clear()
        if self._writer_task is not None:
            self._writer_task.cancel()
        if self._sendfile is not None:
            self._sendfile.close()
        self._wake_drainers()
        if self._on_close is not None:
            self._on_close(self)

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        self._wake_drainers()

    # --- requests --------------------------------------------------------------------------------
    def _request(self, frame: bytearray) -> None:
        self.requests += 1
        try:
            outcome = self._dispatcher.dispatch(frame, self.peer)
        except CloseConnection as e:
            log.info("%s: closing connection: %s", self.peer, e)
            if e.last and not self._slots and not self._write_paused:
                self._ready.extend(cast(list[bytes | bytearray | memoryview], e.last))
            self._close()
            return
        if (
            self._writer_idle
            and not self._slots
            and not self._write_paused
            and not isinstance(outcome, asyncio.Task)
        ):
            if not outcome:
                return  # no response and nothing ahead of it: nothing to wait for
            for chunk in outcome:
                if not isinstance(chunk, _BYTES):
                    break  # a file slice: the writer's sendfile path
            else:
                self._ready.extend(cast(list[bytes | bytearray | memoryview], outcome))
                return
        if self._ready:
            self._flush_ready()  # what is ready goes out before anything queued behind it
        self._slots.append(outcome)
        if self._wakeup is not None and not self._wakeup.done():
            self._wakeup.set_result(None)
        if len(self._slots) >= self._max_queued:
            self._pause_reading()

    def _flush_ready(self) -> None:
        ready, self._ready = self._ready, []
        if self._transport is None:
            return
        try:
            if len(ready) == 1:
                self._transport.write(ready[0])
            else:
                self._transport.writelines(ready)
        except (ConnectionError, OSError, RuntimeError) as e:  # closing/closed transport
            log.info("%s: connection error while writing: %s", self.peer, e)
            self._close()

    def _pause_reading(self) -> None:
        if not self._reading_paused and self._transport is not None:
            self._reading_paused = True
            self._transport.pause_reading()

    def _resume_reading(self) -> None:
        if self._reading_paused and self._transport is not None and not self._closing:
            self._reading_paused = False
            self._transport.resume_reading()

    def close(self) -> None:
        self._close()

    def _close(self) -> None:
        if self._ready and not self._closing:
            self._flush_ready()  # answers to requests before the one that closes us
        self._closing = True
        if self._transport is not None:
            self._transport.close()

    @property
    def pending(self) -> int:
        return len(self._slots)

    def idle_since(self, now: float) -> float:
        """Seconds without a received byte; 0 while requests are in flight (a long poll is not idle)."""
        return 0.0 if self._slots else now - self.last_active

    # --- writer ----------------------------------------------------------------------------------
    async def _writer(self) -> None:
        loop = asyncio.get_running_loop()
        transport = self._transport
        assert transport is not None
        try:
            while not self._closing:
                if not self._slots:
                    self._wakeup = loop.create_future()
                    self._writer_idle = True
                    try:
                        await self._wakeup
                    finally:
                        self._writer_idle = False
                    self._wakeup = None
                    continue
                slot = self._slots[0]
                if isinstance(slot, asyncio.Task):
                    chunks = await slot
                    # Cancelling this writer while it awaits a handler's Task only cancels that Task, and a
                    # handler may still return normally (Python 3.11's wait_for returns the result when the
                    # cancellation lands after its inner future finished: acks=-1 produce, group commits).
                    # connection_lost has dropped every slot by then: nothing is left to answer.
                    if self._closing:
                        return
                else:
                    chunks = slot
                self._slots.popleft()
                out: list[bytes | bytearray | memoryview] = []
                while True:
                    if chunks:
                        for chunk in chunks:
                            if isinstance(chunk, _BYTES):
                                out.append(chunk)
                                continue
                            if self._sendfile is not None:
                                # the bytes before a file slice leave with it (MSG_MORE: one packet train)
                                await self._sendfile.send(chunk, out)  # type: ignore[arg-type]
                            else:
                                if out:  # the bytes before a file slice leave first
                                    transport.writelines(out)
                                await self._copy_slice(chunk)
                            out = []
                    # Responses already complete behind this one go out in the same write.
                    if not self._slots:
                        break
                    slot = self._slots[0]
                    if isinstance(slot, asyncio.Task):
                        if not slot.done():
                            break
                        chunks = slot.result()
                    else:
                        chunks = slot
                    self._slots.popleft()
                if out:
                    if len(out) == 1:
                        transport.write(out[0])
                    else:
                        transport.writelines(out)
                if self._write_paused:
                    self._pause_reading()
                    await self._wait_flushed(low=True)
                if len(self._slots) <= self._max_queued // 2:
                    self._resume_reading()
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is None or task.cancelling():
                raise  # the writer itself is being stopped (connection closed, shutdown)
            # A handler's Task was cancelled by someone else (e.g. a service closing): that request has no
            # answer, and later ones may not overtake it, so the connection goes; the client retries.
            log.warning("%s: a request's handler was cancelled; closing the connection", self.peer)
            self._close()
        except CloseConnection as e:
            log.info("%s: closing connection: %s", self.peer, e)
            self._close()
        except (ConnectionError, OSError) as e:
            log.info("%s: connection error while writing: %s", self.peer, e)
            self._close()
        except Exception:
            log.exception("%s: response writer failed", self.peer)
            self._close()

    async def _copy_slice(self, chunk: Any) -> None:
        """A file slice through the transport (TLS): pread pieces, waiting while the buffer is full."""
        transport = self._transport
        assert transport is not None
        fd, pos = chunk.fd, chunk.position
        end = pos + chunk.size
        loop = asyncio.get_running_loop()
        while pos < end:
            n = min(_COPY_PIECE, end - pos)
            data: bytes | memoryview = _cached_read(fd, n, pos)
            if not data:  # not in the page cache: a disk read would stall every connection on the loop
                data = await loop.run_in_executor(None, os.pread, fd, n, pos)
            if not data:
                raise ConnectionError(f"file ended {end - pos} bytes early (fd {fd} at {pos})")
            transport.write(data)
            pos += len(data)
            if self._write_paused:
                await self._wait_flushed(low=True)

    def _wake_drainers(self) -> None:
        waiters, self._drain_waiters = self._drain_waiters, []
        for w in waiters:
            if not w.done():
                w.set_result(None)

    async def _wait_flushed(self, low: bool = False) -> None:
        """Wait until the transport buffer is empty (or, with low, below the high-water mark)."""
        transport = self._transport
        assert transport is not None
        while not self._closing:
            if low and not self._write_paused:
                return
            if not low and transport.get_write_buffer_size() == 0:
                return
            fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._drain_waiters.append(fut)
            if not low:
                # Lower the high-water mark so resume_writing fires exactly when the buffer empties.
                transport.set_write_buffer_limits(high=0, low=0)
            try:
                await fut
            finally:
                if not low:
                    transport.set_write_buffer_limits(high=_HIGH_WATER)
        if self._closing:
            raise ConnectionError("connection closed")
