"""Request frames out, response frames in: Kafka's size-prefixed framing on the client side, sans-IO.

A request frame is a 4-byte size, the request header (api key, version, correlation id, client id; header v2
adds tagged fields for flexible versions) and the body, all from kafkad.protocol's schema codec. A caller
that encodes its own frames (the follower's Fetch encoder) leaves the correlation id at offset 8 for
`stamp_correlation` to write. A response frame is a 4-byte size and the rest, which starts with the
correlation id; `FrameReader` hands out the rest as one bytearray per frame.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import Any, NamedTuple

from kafkad.protocol import ProtocolDecodeError, RequestHeader, encode_request

MAX_RESPONSE_BYTES = 1 << 30  # a larger size prefix means a confused peer, not a response
_SIZE = struct.Struct(">i")
_CORRELATION = struct.Struct(">i")


class Call(NamedTuple):
    """A request the core wants sent: api key, version and body (the shell frames it and returns the
    decoded response body)."""

    api_key: int
    api_version: int
    body: Mapping[str, Any]


def request_frame(
    api_key: int, api_version: int, correlation_id: int, client_id: str | None, body: Mapping[str, Any]
) -> bytes:
    """A whole request frame, size prefix included. Raises ProtocolError when `body` does not fit the schema."""
    return encode_request(RequestHeader(api_key, api_version, correlation_id, client_id), body)


def stamp_correlation(frame: bytearray, correlation_id: int) -> bytearray:
    """Writes `correlation_id` into an encoded request (size prefix, api key, version, then the id)."""
    _CORRELATION.pack_into(frame, 8, correlation_id)
    return frame


class FrameReader:
    """Cuts response frames out of a byte stream, reading each straight into its own bytearray.

    The shell asks `get_buffer()` for where the next bytes go (the size prefix, then the frame body: never
    past the end of the current frame), fills it (`sock.recv_into`, or asyncio.BufferedProtocol's
    get_buffer/buffer_updated pair, whose names these follow) and reports the count to `buffer_updated`,
    which returns the frame (without its size prefix) once it is whole, else None. A size below 4 (no room
    for a correlation id) or above MAX_RESPONSE_BYTES raises ProtocolDecodeError: the stream is lost.
    """

    __slots__ = ("_frame", "_head", "_pos")

    def __init__(self) -> None:
        self._head = bytearray(4)
        self._frame: bytearray | None = None
        self._pos = 0

    def get_buffer(self, sizehint: int = -1) -> memoryview:
        frame = self._frame
        return memoryview(self._head if frame is None else frame)[self._pos :]

    def buffer_updated(self, nbytes: int) -> bytearray | None:
        self._pos += nbytes
        frame = self._frame
        if frame is None:
            if self._pos < 4:
                return None
            size = _SIZE.unpack(self._head)[0]
            if size < 4 or size > MAX_RESPONSE_BYTES:
                raise ProtocolDecodeError(f"response size {size} out of range")
            self._frame, self._pos = bytearray(size), 0
            return None
        if self._pos == len(frame):
            self._frame, self._pos = None, 0
            return frame
        return None
