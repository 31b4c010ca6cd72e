"""An asyncio Kafka-wire client for broker-to-broker traffic (controller requests, follower fetches).

How it works: one TCP connection, opened lazily by the first `request`. Requests are pipelined: each gets
the next correlation id and a future; one reader task reads size-prefixed response frames and completes the
future of the matching correlation id (Kafka answers a connection's requests in order, but matching by id is
as cheap and catches a confused peer). Any failure of the connection (peer closed, reset, a malformed or
unexpected frame) fails every pending request with ConnectionError and drops the connection; the next
`request` reconnects, after an exponential backoff (`reconnect_backoff_ms` doubling up to
`reconnect_backoff_max_ms`, as Kafka's NetworkClient) when the previous attempt failed. A request not answered
within `request_timeout_ms` raises asyncio.TimeoutError and, as in Kafka's NetworkClient, closes the
connection (its in-order replies can no longer be trusted to arrive), failing the other pending requests.

Response bodies come from `kafkad.protocol.decode_response`; "records" fields are memoryviews into the
response frame (a bytearray per frame), so a follower can append them without another copy.

Runs on the event loop; never blocks.
"""

from __future__ import annotations

import asyncio
import logging
import struct
import time
from collections.abc import Mapping
from typing import Any

from kafkad.protocol import ProtocolDecodeError, ProtocolError, RequestHeader, decode_response, encode_request

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
_CORRELATION = struct.Struct(">i")
MAX_RESPONSE_BYTES = 1 << 30  # a larger size prefix means a confused peer, not a response


class BrokerChannel:
    """A pipelined connection to one broker. Not shared across event loops."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        client_id: str,
        request_timeout_ms: int = 30000,
        reconnect_backoff_ms: int = 50,
        reconnect_backoff_max_ms: int = 1000,
    ) -> None:
        self.host = host
        self.port = port
        self.client_id = client_id
        self.request_timeout_ms = request_timeout_ms
        self.reconnect_backoff_ms = reconnect_backoff_ms
        self.reconnect_backoff_max_ms = reconnect_backoff_max_ms
        self._writer: asyncio.StreamWriter | None = None
        self._reader_task: asyncio.Task[None] | None = None
        self._connecting: asyncio.Future[None] | None = None
        self._pending: dict[int, tuple[int, int, asyncio.Future[dict[str, Any]]]] = {}
        self._next_correlation = 0
        self._failures = 0  # consecutive failed connects (backoff exponent)
        self._next_attempt = 0.0  # monotonic time before which no connect is tried
        self._closed = False

    def __repr__(self) -> str:
        return f"BrokerChannel({self.host}:{self.port}, client_id={self.client_id!r})"

    @property
    def connected(self) -> bool:
        return self._writer is not None

    def set_address(self, host: str, port: int) -> None:
        """The broker moved (new registration): drop the connection; the next request dials the new one."""
        if (host, port) != (self.host, self.port):
            self.host, self.port = host, port
            self._drop(ConnectionError(f"{self}: broker address changed"))
            self._failures = 0
            self._next_attempt = 0.0

    async def request(self, api_key: int, api_version: int, body: Mapping[str, Any]) -> dict[str, Any]:
        """Send one request and wait for its response body.

        Raises ConnectionError (the connection failed or could not be opened; the next call reconnects),
        asyncio.TimeoutError (no answer within request_timeout_ms; the connection is closed), or a
        ProtocolError from encoding the request.
        """
        if self._closed:
            raise ConnectionError(f"{self}: closed")
        async with asyncio.timeout(self.request_timeout_ms / 1000) as cm:
            if self._writer is None:
                await self._connect()
            writer = self._writer
            if writer is None:  # dropped again while we were connecting
                raise ConnectionError(f"{self}: connection lost")
            self._next_correlation = (self._next_correlation + 1) & 0x7FFFFFFF
            cid = self._next_correlation
            frame = encode_request(RequestHeader(api_key, api_version, cid, self.client_id), body)
            fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
            self._pending[cid] = (api_key, api_version, fut)
            try:
                try:
                    writer.write(frame)
                    await writer.drain()
                except OSError as e:
                    self._drop(ConnectionError(f"{self}: {e}"))
                    raise ConnectionError(f"{self}: {e}") from None
                return await fut
            finally:
                if cm.expired():
                    self._drop(ConnectionError(f"{self}: request timed out"))
                elif not fut.done():
                    # Cancelled by our caller: the entry stays until the answer arrives (then skipped),
                    # so the connection's other requests are not disturbed.
                    fut.cancel()
                elif not fut.cancelled():
                    fut.exception()  # mark retrieved when we left through another error
        raise AssertionError("unreachable")  # pragma: no cover (asyncio.timeout re-raises)

    def close(self) -> None:
        """Close for good: pending requests fail with ConnectionError, later requests too."""
        self._closed = True
        self._drop(ConnectionError(f"{self}: closed"))

    # --- internals -------------------------------------------------------------------------------
    async def _connect(self) -> None:
        shared = self._connecting
        if shared is not None:  # another request is dialing: share its outcome
            await asyncio.wait({shared})
            if shared.cancelled() or shared.exception() is not None:
                raise ConnectionError(f"{self}: connect failed")
            return
        loop = asyncio.get_running_loop()
        self._connecting = loop.create_future()
        try:
            wait = self._next_attempt - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            try:
                reader, writer = await asyncio.open_connection(self.host, self.port)
            except OSError as e:
                self._failures += 1
                backoff = min(
                    self.reconnect_backoff_ms * (1 << min(self._failures - 1, 20)),
                    self.reconnect_backoff_max_ms,
                )
                self._next_attempt = time.monotonic() + backoff / 1000
                err = ConnectionError(f"{self}: connect failed: {e}")
                self._connecting.set_exception(err)
                self._connecting.exception()  # retrieved: sharers raise their own
                raise err from None
            if self._closed:
                writer.close()
                raise ConnectionError(f"{self}: closed")
            self._failures = 0
            self._next_attempt = 0.0
            self._writer = writer
            self._reader_task = loop.create_task(self._read_loop(reader, writer))
            self._connecting.set_result(None)
        finally:
            if not self._connecting.done():
                self._connecting.cancel()
            self._connecting = None

    async def _read_loop(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                size = _SIZE.unpack(await reader.readexactly(4))[0]
                if size < 4 or size > MAX_RESPONSE_BYTES:
                    raise ProtocolDecodeError(f"response size {size} out of range")
                frame = bytearray(await reader.readexactly(size))
                cid = _CORRELATION.unpack_from(frame, 0)[0]
                entry = self._pending.pop(cid, None)
                if entry is None:
                    raise ProtocolDecodeError(f"response with unknown correlation id {cid}")
                api_key, api_version, fut = entry
                _, body = decode_response(api_key, api_version, frame)
                if not fut.done():
                    fut.set_result(body)
        except asyncio.CancelledError:
            raise
        except (asyncio.IncompleteReadError, OSError, ProtocolError) as e:
            if self._writer is writer:
                log.debug("%s: connection dropped: %s", self, e)
                self._drop(ConnectionError(f"{self}: {e or 'connection closed by peer'}"))

    def _drop(self, err: ConnectionError) -> None:
        writer, self._writer = self._writer, None
        task, self._reader_task = self._reader_task, None
        if task is not None and task is not asyncio.current_task():
            task.cancel()
        if writer is not None:
            writer.close()
        pending, self._pending = self._pending, {}
        for _, _, fut in pending.values():
            if not fut.done():
                fut.set_exception(err)
