"""The handler registry: one module per API (kafkad.api) registers (api_key, min, max, async handler).

`kafkad.api.load_handlers()` imports every module of the api package (so a new API is one new file), and
ApiVersions is derived from the registry, never from a second list. A handler gets a
RequestContext and the decoded Request and returns the response body (a dict, see docs/interfaces.md) or
None for "no response" (acks=0 Produce). KafkaError raised by a handler becomes that error code in the
body built by the spec's `error_body` (top-level `error_code` unless the module knows better).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kafkad.protocol import ErrorCode, Request, RequestHeader

if TYPE_CHECKING:
    from kafkad.api.broker import Broker

Body = dict[str, Any]


@dataclass(slots=True)
class RequestContext:
    broker: Broker
    header: RequestHeader
    peer: str = "?"
    listener: str = "PLAINTEXT"
    # Free per-request scratch for handlers; None until one sets it (one context per request, so no
    # dict is built for the many that never use it).
    extra: dict[str, Any] | None = None
    # The connection's security session on TLS/SASL listeners (kafkad.security.session.Session: its
    # principal, SASL state); None on PLAINTEXT listeners, whose principal is User:ANONYMOUS.
    session: Any = None

    @property
    def version(self) -> int:
        return self.header.api_version


Handler = Callable[[RequestContext, Request], Awaitable[Mapping[str, Any] | None]]
ErrorBody = Callable[[Request, ErrorCode], Mapping[str, Any]]


def top_level_error(_request: Request, code: ErrorCode) -> Mapping[str, Any]:
    return {"error_code": int(code), "throttle_time_ms": 0}


@dataclass(frozen=True, slots=True)
class HandlerSpec:
    api_key: int
    min_version: int
    max_version: int
    fn: Handler
    error_body: ErrorBody = top_level_error

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version


class HandlerRegistry:
    def __init__(self) -> None:
        self._specs: dict[int, HandlerSpec] = {}

    def add(self, spec: HandlerSpec) -> None:
        if spec.api_key in self._specs and self._specs[spec.api_key].fn is not spec.fn:
            raise ValueError(f"api key {spec.api_key} registered twice")
        self._specs[spec.api_key] = spec

    def get(self, api_key: int) -> HandlerSpec | None:
        return self._specs.get(api_key)

    def api_versions(self) -> list[Body]:
        """ApiVersions' api_keys entries, from what is registered."""
        return [
            {"api_key": s.api_key, "min_version": s.min_version, "max_version": s.max_version}
            for s in sorted(self._specs.values(), key=lambda s: s.api_key)
        ]

    def __contains__(self, api_key: int) -> bool:
        return api_key in self._specs


REGISTRY = HandlerRegistry()


def handler(
    api_key: int, min_version: int, max_version: int, *, error_body: ErrorBody = top_level_error
) -> Callable[[Handler], Handler]:
    """Decorator: register `fn` as the handler of `api_key` for [min_version, max_version]."""

    def deco(fn: Handler) -> Handler:
        REGISTRY.add(HandlerSpec(api_key, min_version, max_version, fn, error_body))
        return fn

    return deco
