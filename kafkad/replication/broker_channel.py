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
response frame, a bytearray per frame (asyncio.BufferedProtocol, `ScratchFrameReader`): a response of up to
64 KiB arrives with its size prefix in one recv into a scratch buffer and is copied once into its frame
(one recv instead of three: size, body, and the empty read libuv makes after a full buffer), a larger one
is read into its frame directly past its first 64 KiB. The follower's
fetches skip the codec both ways (`request_raw` / `send_raw`: an encoded request in, the response frame out)
and, once connected, the per-request coroutine and timer too (`send_raw`: one watchdog timer per channel
enforces `request_timeout_ms` for them).

This is the asyncio shell of kafkad's client core (kafkad.client): the request frames, the correlation ids
and their matching (`InFlight`), the response framing (`FrameReader`, which reads into the per-frame
bytearrays) and the SASL exchange (`SaslClient`, with the credentials of kafkad.security.inter_broker) are
the core's; this module adds the connection's life (dial, TLS, reconnect backoff, timeouts, pipelining).

Runs on the event loop; never blocks.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
from collections.abc import Callable, Mapping
from typing import Any

from kafkad.client import (
    Call,
    InFlight,
    SaslClient,
    ScratchFrameReader,
    UnexpectedResponse,
    request_frame,
    stamp_correlation,
)
from kafkad.protocol import ProtocolDecodeError, decode_response

log = logging.getLogger(__name__)

_NO_DEADLINE = float("inf")
_RAW = -1  # api_version of a pending request_raw: answered with the frame

# A pending request: (api key, version or _RAW, future, deadline: loop time, inf for _roundtrip's requests,
# which have their own timeout)
_Pending = tuple[int, int, "asyncio.Future[Any]", float]


def _stamper(frame: bytearray) -> Callable[[int], bytearray]:
    """Writes a correlation id into an encoded request."""
    return lambda cid: stamp_correlation(frame, cid)


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
        self._wire: _Wire | None = None
        self._connecting: asyncio.Future[None] | None = None
        self._inflight: InFlight[_Pending] = InFlight()  # correlation ids of this channel's connections
        self._watchdog: asyncio.TimerHandle | None = None
        self._failures = 0  # consecutive failed connects (backoff exponent)
        self._next_attempt = 0.0  # monotonic time before which no connect is tried
        self._closed = False

    def __repr__(self) -> str:
        return f"BrokerChannel({self.host}:{self.port}, client_id={self.client_id!r})"

    @property
    def connected(self) -> bool:
        return self._wire is not None

    def set_address(self, host: str, port: int) -> None:
        """The broker moved (new registration): drop the connection; the next request dials the new one."""
        if (host, port) != (self.host, self.port):
            self.host, self.port = host, port
            self._drop(ConnectionError(f"{self}: broker address changed"))
            self._failures = 0
            self._next_attempt = 0.0

    async def request(
        self, api_key: int, api_version: int, body: Mapping[str, Any], *, auth_step: bool = False
    ) -> dict[str, Any]:
        """Send one request and wait for its response body.

        Raises ConnectionError (the connection failed or could not be opened; the next call reconnects),
        asyncio.TimeoutError (no answer within request_timeout_ms; the connection is closed), or a
        ProtocolError from encoding the request.
        """
        client_id = self.client_id
        body_out: dict[str, Any] = await self._roundtrip(
            api_key,
            api_version,
            lambda cid: request_frame(api_key, api_version, cid, client_id, body),
            auth_step=auth_step,
        )
        return body_out

    async def request_raw(self, frame: bytearray) -> bytearray:
        """Send a request already encoded (size prefix included, header v1+ with any correlation id: it
        is written over) and return its response frame from the correlation id on, not decoded: for
        callers with their own encoder and decoder (the follower's fetch_request and fetch_response)."""
        answer: bytearray = await self._roundtrip(-1, _RAW, _stamper(frame))
        return answer

    def send_raw(self, frame: bytearray) -> asyncio.Future[bytearray] | None:
        """`request_raw` without a coroutine or a timer per request, for a connected channel: writes the
        frame now and returns the future of its response frame, or None when the channel must first
        (re)connect, authenticate or drain its write buffer (then use request_raw). The request still
        times out after request_timeout_ms, through the channel's one watchdog timer (TimeoutError, and
        the connection is closed as in request)."""
        wire = self._wire
        if wire is None or self._connecting is not None or wire.paused is not None or self._closed:
            return None
        inflight = self._inflight
        cid = inflight.next_id()
        stamp_correlation(frame, cid)
        loop = wire.loop
        fut: asyncio.Future[bytearray] = loop.create_future()
        inflight.expect(cid, (-1, _RAW, fut, loop.time() + self.request_timeout_ms / 1000))
        if self._watchdog is None:
            self._watchdog = loop.call_later(self.request_timeout_ms / 1000, self._check_deadlines)
        try:
            wire.transport.write(frame)
        except OSError as e:
            self._drop(ConnectionError(f"{self}: {e}"))
        return fut

    def _check_deadlines(self) -> None:
        """The watchdog: fail the oldest send_raw request past its deadline (and the connection with it),
        else wait for the oldest deadline."""
        self._watchdog = None
        wire = self._wire
        if wire is None:
            return
        now = wire.loop.time()
        soonest = None
        for _, _, fut, deadline in self._inflight.entries.values():
            if fut.done() or deadline == _NO_DEADLINE:  # answered, or request's own timeout applies
                continue
            if deadline <= now:
                fut.set_exception(TimeoutError(f"{self}: request timed out"))
                self._drop(ConnectionError(f"{self}: request timed out"))
                return
            if soonest is None or deadline < soonest:
                soonest = deadline
        if soonest is not None:
            self._watchdog = wire.loop.call_at(soonest, self._check_deadlines)

    async def _roundtrip(
        self,
        api_key: int,
        api_version: int,
        make_frame: Callable[[int], bytes | bytearray],
        *,
        auth_step: bool = False,
    ) -> Any:
        if self._closed:
            raise ConnectionError(f"{self}: closed")
        async with asyncio.timeout(self.request_timeout_ms / 1000) as cm:
            # While a new connection authenticates (SASL), only its own steps (auth_step) may use it.
            if self._wire is None or (self._connecting is not None and not auth_step):
                await self._connect()
            wire = self._wire
            if wire is None:  # dropped again while we were connecting
                raise ConnectionError(f"{self}: connection lost")
            cid = self._inflight.next_id()
            frame = make_frame(cid)
            fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            self._inflight.expect(cid, (api_key, api_version, fut, _NO_DEADLINE))
            try:
                try:
                    wire.transport.write(frame)
                    if wire.paused is not None:
                        await wire.paused
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
                from kafkad.security import inter_broker

                sec = inter_broker.CLIENT  # inter.broker.listener.name with TLS and/or SASL, else None
                ctx = sec.ssl_context if sec is not None else None
                _, wire = await loop.create_connection(
                    lambda: _Wire(self),
                    self.host,
                    self.port,
                    ssl=ctx,
                    server_hostname=self.host if ctx else None,
                )
            except (OSError, ssl.SSLError) as e:
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
                wire.transport.close()
                raise ConnectionError(f"{self}: closed")
            self._wire = wire
            if sec is not None and sec.mechanism:
                try:
                    await self._authenticate(SaslClient(sec.mechanism, sec.username, sec.password))
                except Exception as e:  # refused, or a peer's garbage in the SASL steps
                    self._failures += 1
                    self._next_attempt = time.monotonic() + self.reconnect_backoff_max_ms / 1000
                    self._drop(ConnectionError(f"{self}: {e}"))
                    self._connecting.set_exception(ConnectionError(f"{self}: {e}"))
                    self._connecting.exception()
                    raise ConnectionError(f"{self}: {e}") from None
            self._failures = 0
            self._next_attempt = 0.0
            self._connecting.set_result(None)
        finally:
            if not self._connecting.done():
                self._connecting.cancel()
            self._connecting = None

    async def _authenticate(self, sasl: SaslClient) -> None:
        """The SASL exchange of a new connection (its steps go first: auth_step)."""
        call: Call | None = sasl.start()
        while call is not None:
            call = sasl.receive(await self.request(*call, auth_step=True))

    def _on_frame(self, wire: _Wire, frame: bytearray) -> None:
        """One response frame (without its size prefix) from `wire`."""
        if wire is not self._wire:
            return
        try:
            entry = self._inflight.match(frame)  # frames are >= 4 bytes (FrameReader checks)
        except UnexpectedResponse as e:
            self._lost(wire, e)
            return
        api_key, api_version, fut, _ = entry
        if fut.done():  # its caller gave up (cancelled): skip the answer
            return
        if api_version == _RAW:
            fut.set_result(frame)
            return
        try:
            _, body = decode_response(api_key, api_version, frame)
        except Exception as e:  # a peer's garbage raises whatever the decoder meets
            # Its request fails now (it was no longer pending: _drop would not see it) and so does the
            # connection; the caller retries on a new one. Nothing escapes into the transport.
            fut.set_exception(ConnectionError(f"{self}: undecodable response: {e!r}"))
            self._lost(wire, e)
            return
        fut.set_result(body)

    def _lost(self, wire: _Wire, exc: BaseException | None) -> None:
        if wire is self._wire:
            log.debug("%s: connection dropped: %s", self, exc)
            self._drop(ConnectionError(f"{self}: {exc or 'connection closed by peer'}"))

    def _drop(self, err: ConnectionError) -> None:
        wire, self._wire = self._wire, None
        if wire is not None:
            wire.transport.close()
            wire.wake_writers()
        pending = self._inflight.drain()
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None
        for _, _, fut, _ in pending:
            if not fut.done():
                fut.set_exception(err)


class _Wire(asyncio.BufferedProtocol):
    """The socket side: reads each response straight into its own bytearray (kernel -> frame, no other
    copy: a 1 MiB fetch response is not staged through a stream buffer), and tells the channel."""

    def __init__(self, channel: BrokerChannel) -> None:
        self.channel = channel
        self.transport: asyncio.Transport = None  # type: ignore[assignment]  # set by connection_made
        self.paused: asyncio.Future[None] | None = None  # write flow control
        self.loop: asyncio.AbstractEventLoop = None  # type: ignore[assignment]  # set by connection_made
        self._reader = ScratchFrameReader()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.loop = asyncio.get_running_loop()
        self.transport = transport  # type: ignore[assignment]  # uvloop's is no asyncio.Transport subclass

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._reader.get_buffer(sizehint)

    def buffer_updated(self, nbytes: int) -> None:
        try:
            frames = self._reader.buffer_updated(nbytes)
        except ProtocolDecodeError as e:  # a size prefix out of range
            self.channel._lost(self, e)
            return
        for frame in frames:
            self.channel._on_frame(self, frame)

    def connection_lost(self, exc: Exception | None) -> None:
        self.wake_writers()
        self.channel._lost(self, exc)

    def pause_writing(self) -> None:
        if self.paused is None:
            self.paused = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        self.wake_writers()

    def wake_writers(self) -> None:
        paused, self.paused = self.paused, None
        if paused is not None and not paused.done():
            paused.set_result(None)
