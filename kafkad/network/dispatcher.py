"""From a request frame to a pending response: decode, find the handler, run it, encode, map errors.

Sans transport: the connection hands in frames and gets back, per request, either chunks ready to write,
None (no response), or a Task that will produce them. Client input can only close its own connection
(CloseConnection); handler bugs become UNKNOWN_SERVER_ERROR responses, never a dead broker.

Handlers run eagerly: the request's coroutine is stepped once right here, and most (OffsetCommit,
Heartbeat, Metadata, acks=1 Produce, ...) finish without ever suspending, so their response comes back
as plain chunks with no Task, no Future and no extra loop iteration. Only a coroutine that actually
waits (a long-poll Fetch, a JoinGroup barrier, acks=all) is handed, half-run, to a Task (`_resume`).
"""

from __future__ import annotations

import asyncio
import logging
import time
import types
from collections.abc import Callable, Coroutine, Generator, Mapping
from typing import TYPE_CHECKING, Any

from kafkad.network.registry import HandlerRegistry, HandlerSpec, RequestContext
from kafkad.protocol import (
    ApiKey,
    Chunk,
    ErrorCode,
    InvalidRequestError,
    KafkaError,
    Request,
    RequestHeader,
    UnsupportedVersionError,
    api_versions_fallback_response,
    decode_request,
    encode_response,
)

if TYPE_CHECKING:
    from kafkad.api.broker import Broker
    from kafkad.security.session import Session

log = logging.getLogger(__name__)
_perf_counter = time.perf_counter

Outcome = list[Chunk] | None


class CloseConnection(Exception):
    """The peer broke the protocol: close this connection (and only it), after writing `last` if given
    (e.g. a failed authentication's answer)."""

    def __init__(self, message: str, last: Outcome = None) -> None:
        super().__init__(message)
        self.last = last


class Dispatcher:
    def __init__(
        self,
        broker: Broker,
        registry: HandlerRegistry,
        *,
        on_request: Callable[[int, float], None] | None = None,
    ) -> None:
        self.broker = broker
        self.registry = registry
        self._on_request = on_request
        api = registry.get(ApiKey.API_VERSIONS)
        self._api_versions_max = api.max_version if api else 0
        # api key -> (spec, min version, max version), filled on first use: one dict lookup per request.
        self._specs: dict[int, tuple[HandlerSpec, int, int]] = {}

    def dispatch(
        self, frame: bytearray, peer: str, session: Session | None = None
    ) -> Outcome | asyncio.Task[Outcome]:
        """Raises CloseConnection for a malformed frame or an unanswerable request. `session`: the
        connection's security session (TLS and SASL listeners only; None = PLAINTEXT, User:ANONYMOUS)."""
        try:
            request = decode_request(frame)
        except UnsupportedVersionError as e:
            return self._unsupported(e.header, peer)
        except InvalidRequestError as e:
            raise CloseConnection(str(e)) from None
        header = request[0]
        entry = self._specs.get(header[0])
        if entry is None:
            found = self.registry.get(header[0])
            if found is None:
                return self._unsupported(header, peer)
            entry = self._specs[header[0]] = (found, found.min_version, found.max_version)
        spec, lo, hi = entry
        if not lo <= header[1] <= hi:
            return self._unsupported(header, peer)
        started = _perf_counter()
        ctx = (
            RequestContext(self.broker, header, peer)
            if session is None
            else RequestContext(self.broker, header, peer, session.listener, None, session)
        )
        # The handler's own coroutine is stepped here (no wrapper coroutine: one frame less per request).
        try:
            coro: Coroutine[Any, Any, Mapping[str, Any] | None] = spec.fn(ctx, request)  # type: ignore[assignment]
            waiting_on = coro.send(None)
        except StopIteration as done:
            # _respond inlined for the common case: an answer ready at once.
            body = done.value
            on_request = self._on_request
            if on_request is not None:
                on_request(header[0], _perf_counter() - started)
            if body is None:
                return None
            try:
                return encode_response(header, body)
            except Exception:
                log.exception("cannot encode response to api %d v%d", header[0], header[1])
                raise CloseConnection("response encoding failed") from None
        except KafkaError as e:
            log.debug("%s: %s", peer, e)
            return self._respond(spec, request, spec.error_body(request, e.code), started)
        except CloseConnection:
            raise
        except Exception:
            self._log_failure(peer, header)
            return self._respond(
                spec, request, spec.error_body(request, ErrorCode.UNKNOWN_SERVER_ERROR), started
            )
        return asyncio.get_running_loop().create_task(
            self._finish(spec, request, peer, coro, waiting_on, started)
        )

    def _unsupported(self, header: RequestHeader, peer: str) -> Outcome:
        if header.api_key == ApiKey.API_VERSIONS:
            # KIP-511: a v0-layout answer the client can read whatever version it sent.
            return [api_versions_fallback_response(header.correlation_id, self._api_versions_max)]
        # Kafka's SocketServer.parseRequestHeader: an api or version it does not serve is an
        # InvalidRequestException and the connection is closed, with no answer.
        log.info("%s: unsupported api key %d version %d", peer, header.api_key, header.api_version)
        raise CloseConnection(f"unsupported api key {header.api_key} version {header.api_version}")

    async def _finish(
        self,
        spec: HandlerSpec,
        request: Request,
        peer: str,
        coro: Coroutine[Any, Any, Mapping[str, Any] | None],
        waiting_on: Any,
        started: float,
    ) -> Outcome:
        """The rest of a handler that suspended in `dispatch`, driven by a Task."""
        body: Mapping[str, Any] | None
        try:
            body = await _resume(coro, waiting_on)
        except KafkaError as e:
            log.debug("%s: %s", peer, e)
            body = spec.error_body(request, e.code)
        except CloseConnection:  # a handler may drop the connection (e.g. Metadata without metadata)
            raise
        except Exception:
            self._log_failure(peer, request.header)
            body = spec.error_body(request, ErrorCode.UNKNOWN_SERVER_ERROR)
        return self._respond(spec, request, body, started)

    def _respond(
        self, spec: HandlerSpec, request: Request, body: Mapping[str, Any] | None, started: float
    ) -> Outcome:
        header = request.header
        if self._on_request is not None:
            self._on_request(header.api_key, _perf_counter() - started)
        if body is None:
            return None
        try:
            return encode_response(header, body)
        except Exception:
            log.exception("cannot encode response to api %d v%d", header.api_key, header.api_version)
            raise CloseConnection("response encoding failed") from None

    @staticmethod
    def _log_failure(peer: str, header: RequestHeader) -> None:
        log.exception("%s: handler for api %d v%d failed", peer, header.api_key, header.api_version)


@types.coroutine
def _resume(
    coro: Coroutine[Any, Any, Mapping[str, Any] | None], waiting_on: Any
) -> Generator[Any, Any, Mapping[str, Any] | None]:
    """Finish a coroutine already stepped once: pass what it waits on to the Task driving us, and
    the Task's sends and throws (results, cancellation) back into it, like `await` would."""
    while True:
        try:
            sent = yield waiting_on
        except BaseException as exc:  # everything thrown in (cancellation too) belongs to coro
            try:
                waiting_on = coro.throw(exc)
            except StopIteration as done:
                result: Mapping[str, Any] | None = done.value
                return result
        else:
            try:
                waiting_on = coro.send(sent)
            except StopIteration as done:
                result = done.value
                return result
