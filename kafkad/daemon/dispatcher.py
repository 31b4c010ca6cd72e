"""From a request frame to a pending response: decode, find the handler, run it, encode, map errors.

Sans transport: the connection hands in frames and gets back, per request, either chunks ready to write,
None (no response), or a Task that will produce them. Client input can only close its own connection
(CloseConnection); handler bugs become UNKNOWN_SERVER_ERROR responses, never a dead broker.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from kafkad.daemon.handlers import HandlerRegistry, HandlerSpec, RequestContext
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
    from kafkad.daemon.broker import Broker

log = logging.getLogger(__name__)

Outcome = list[Chunk] | None


class CloseConnection(Exception):
    """The peer broke the protocol: close this connection (and only it)."""


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

    def dispatch(self, frame: bytearray, peer: str) -> Outcome | asyncio.Task[Outcome]:
        """Raises CloseConnection for a malformed frame or an unanswerable request."""
        try:
            request = decode_request(frame)
        except UnsupportedVersionError as e:
            return self._unsupported(e.header, peer)
        except InvalidRequestError as e:
            raise CloseConnection(str(e)) from None
        header = request.header
        spec = self.registry.get(header.api_key)
        if spec is None or not spec.supports(header.api_version):
            return self._unsupported(header, peer)
        ctx = RequestContext(self.broker, header, peer)
        return asyncio.get_running_loop().create_task(self._run(spec, ctx, request))

    def _unsupported(self, header: RequestHeader, peer: str) -> Outcome:
        if header.api_key == ApiKey.API_VERSIONS:
            # KIP-511: a v0-layout answer the client can read whatever version it sent.
            return [api_versions_fallback_response(header.correlation_id, self._api_versions_max)]
        log.info("%s: unsupported api key %d version %d", peer, header.api_key, header.api_version)
        try:
            return encode_response(header, {"error_code": int(ErrorCode.UNSUPPORTED_VERSION)})
        except Exception:
            # No schema for that version: nothing the client could parse; Kafka closes too.
            raise CloseConnection(
                f"unsupported api key {header.api_key} version {header.api_version}"
            ) from None

    async def _run(self, spec: HandlerSpec, ctx: RequestContext, request: Request) -> Outcome:
        body: Mapping[str, Any] | None
        started = time.perf_counter()
        try:
            body = await spec.fn(ctx, request)
        except KafkaError as e:
            log.debug("%s: %s", ctx.peer, e)
            body = spec.error_body(request, e.code)
        except Exception:
            log.exception(
                "%s: handler for api %d v%d failed",
                ctx.peer,
                request.header.api_key,
                request.header.api_version,
            )
            body = spec.error_body(request, ErrorCode.UNKNOWN_SERVER_ERROR)
        if self._on_request is not None:
            self._on_request(request.header.api_key, time.perf_counter() - started)
        if body is None:
            return None
        try:
            return encode_response(request.header, body)
        except Exception:
            log.exception(
                "cannot encode response to api %d v%d", request.header.api_key, request.header.api_version
            )
            raise CloseConnection("response encoding failed") from None
