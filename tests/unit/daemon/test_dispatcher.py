"""Dispatcher: version gating from the cached spec table, and errors raised before a handler suspends."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any, cast

import pytest

from kafkad.api.broker import Broker
from kafkad.network.dispatcher import CloseConnection, Dispatcher
from kafkad.network.registry import HandlerRegistry, HandlerSpec, RequestContext
from kafkad.protocol import (
    ApiKey,
    ErrorCode,
    KafkaError,
    Request,
    RequestHeader,
    decode_response,
    encode_request,
)


def _frame(version: int, corr: int, member: str) -> bytearray:
    body = {"group_id": "g", "generation_id": 1, "member_id": member, "group_instance_id": None}
    return bytearray(encode_request(RequestHeader(ApiKey.HEARTBEAT, version, corr, "c"), body)[4:])


async def _handle(ctx: RequestContext, request: Request) -> Mapping[str, Any]:
    member = request.body["member_id"]
    if member == "kafka-error":
        raise KafkaError(ErrorCode.UNKNOWN_MEMBER_ID, "who?")
    if member == "bug":
        raise RuntimeError("handler bug")
    return {"throttle_time_ms": 0, "error_code": 0}


def _dispatcher(max_version: int = 2) -> tuple[Dispatcher, list[int]]:
    reg = HandlerRegistry()
    reg.add(HandlerSpec(ApiKey.HEARTBEAT, 1, max_version, _handle))
    recorded: list[int] = []
    return Dispatcher(cast(Broker, object()), reg, on_request=lambda k, _s: recorded.append(k)), recorded


def _error(out: Any, version: int) -> tuple[int, int]:
    assert isinstance(out, list) and len(out) == 1
    corr, body = decode_response(ApiKey.HEARTBEAT, version, out[0][4:])
    return corr, body["error_code"]


def test_versions_outside_the_spec_close_the_connection_after_a_supported_one_was_cached() -> None:
    """Kafka's SocketServer: a version the broker does not serve (here one the schema knows, outside the
    handler's range, and one below it) closes the connection, with no answer."""

    async def go() -> None:
        d, recorded = _dispatcher(max_version=2)
        assert _error(d.dispatch(_frame(2, 1, "ok"), "p"), 2) == (1, 0)
        with pytest.raises(CloseConnection, match="version 3"):
            d.dispatch(_frame(3, 2, "ok"), "p")
        with pytest.raises(CloseConnection, match="version 0"):
            d.dispatch(_frame(0, 3, "ok"), "p")
        assert _error(d.dispatch(_frame(1, 4, "ok"), "p"), 1) == (4, 0)
        assert recorded == [ApiKey.HEARTBEAT, ApiKey.HEARTBEAT]  # refused requests run no handler

    asyncio.run(go())


def test_unregistered_api_key_closes_the_connection() -> None:
    async def go() -> None:
        d = Dispatcher(cast(Broker, object()), HandlerRegistry())
        with pytest.raises(CloseConnection, match="api key 12 version 3"):
            d.dispatch(_frame(3, 5, "ok"), "p")

    asyncio.run(go())


def test_errors_raised_before_the_first_wait_become_error_bodies() -> None:
    async def go() -> None:
        d, recorded = _dispatcher(max_version=3)
        assert _error(d.dispatch(_frame(3, 6, "kafka-error"), "p"), 3) == (6, ErrorCode.UNKNOWN_MEMBER_ID)
        assert _error(d.dispatch(_frame(3, 7, "bug"), "p"), 3) == (7, ErrorCode.UNKNOWN_SERVER_ERROR)
        assert recorded == [ApiKey.HEARTBEAT, ApiKey.HEARTBEAT]

    asyncio.run(go())
