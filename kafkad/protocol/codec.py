"""Request/response framing: headers plus the compiled body codecs from the registry.

Header rules (KIP-482/511): a flexible version uses request header v2 (v1 + tagged fields; client_id keeps
its int16 length) and response header v1 (v0 + tagged fields); non-flexible versions use v1 / v0;
ControlledShutdown v0 uses request header v0 (no client_id); ApiVersions responses always use header v0.
Tagged fields in request headers are read and dropped (no Kafka header tag is defined for requests).
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import Any, NamedTuple, Protocol

from kafkad.protocol import fetch_codec
from kafkad.protocol import primitives as p
from kafkad.protocol.compiler import read_tags
from kafkad.protocol.errors import (
    ErrorCode,
    InvalidRequestError,
    ProtocolDecodeError,
    UnsupportedVersionError,
)
from kafkad.protocol.registry import CODECS, SCHEMAS, ApiKey, BodyCodec

# What can go wrong inside a decoder on bad input; all of it becomes the module's decode errors.
_DECODE_FAILURES = (
    ProtocolDecodeError,
    struct.error,
    IndexError,
    ValueError,
    OverflowError,
    MemoryError,
)

_HEAD = struct.Struct(">hhi")
_HEAD_V1 = struct.Struct(">hhih")  # header v1's fixed part: key, version, correlation id, client_id length
_read_client_id = p.string_reader(compact=False, nullable=True)
_write_client_id = p.string_writer(compact=False, nullable=True)
# Plain ints: comparing against an IntEnum member costs an attribute lookup per request.
_CONTROLLED_SHUTDOWN = int(ApiKey.CONTROLLED_SHUTDOWN)
_API_VERSIONS = int(ApiKey.API_VERSIONS)
_FETCH = int(ApiKey.FETCH)
_FAST_FETCH_MIN, _FAST_FETCH_MAX = fetch_codec.FIRST_VERSION, fetch_codec.LAST_VERSION
_read_fetch = fetch_codec.read_request
_write_fetch = fetch_codec.write_response


class RequestHeader(NamedTuple):
    """Immutable like a frozen dataclass; a NamedTuple because one is built per request (~3x cheaper)."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


class Request(NamedTuple):
    header: RequestHeader
    body: dict[str, Any]


_new = tuple.__new__
_RESP_HEAD_V0 = struct.Struct(">ii")  # size placeholder, correlation id
_RESP_HEAD_V1 = struct.Struct(">iiB")  # ... plus an empty tagged-field section
_pack_size_into = p.I32.pack_into  # NamedTuple construction without the generated __new__'s Python frame


class RecordsRef(Protocol):
    """What a records field may hold when encoding, besides bytes: its own chunk in the output."""

    @property
    def size(self) -> int: ...


Chunk = bytes | RecordsRef


def _uses_header_v0(api_key: int, api_version: int) -> bool:
    return api_version == 0 and api_key == _CONTROLLED_SHUTDOWN


_COMPILED_GET = CODECS.compiled.get  # hot paths: a C dict lookup; CODECS.get compiles on a miss
_CODECS_GET = CODECS.get


def _codec(api_key: int, api_version: int) -> BodyCodec:
    codec = _COMPILED_GET((api_key, api_version)) or _CODECS_GET((api_key, api_version))
    if codec is None:
        raise ValueError(f"no schema for api {api_key} v{api_version}")
    return codec


def decode_request_header(buf: p.Buf) -> tuple[RequestHeader, int]:
    """The v0/v1 part of a request header (no tagged fields); raises InvalidRequestError(None, ...)."""
    size = len(buf)
    if size >= 10:
        # One unpack for the fixed part and the client_id length; short frames take the general path.
        api_key, api_version, correlation_id, n = _HEAD_V1.unpack_from(buf, 0)
        if api_version == 0 and api_key == _CONTROLLED_SHUTDOWN:
            return _new(RequestHeader, (api_key, api_version, correlation_id, None)), 8
        if n == -1:
            return _new(RequestHeader, (api_key, api_version, correlation_id, None)), 10
        end = 10 + n
        if n >= 0 and end <= size:
            try:
                client_id = str(buf[10:end], "utf-8")
            except ValueError as e:
                raise InvalidRequestError(None, f"bad request header: {e}") from None
            return _new(RequestHeader, (api_key, api_version, correlation_id, client_id)), end
    try:
        api_key, api_version, correlation_id = _HEAD.unpack_from(buf, 0)
        if _uses_header_v0(api_key, api_version):
            return RequestHeader(api_key, api_version, correlation_id, None), _HEAD.size
        client_id, pos = _read_client_id(buf, _HEAD.size)
    except _DECODE_FAILURES as e:
        raise InvalidRequestError(None, f"bad request header: {e}") from None
    return RequestHeader(api_key, api_version, correlation_id, client_id), pos


def decode_request(frame: bytearray | bytes) -> Request:
    """Decode one request frame (no size prefix). Records fields are memoryviews into `frame`."""
    buf = memoryview(frame)
    header, pos = decode_request_header(buf)
    codec = _COMPILED_GET((header[0], header[1])) or _CODECS_GET((header[0], header[1]))
    if codec is None:
        raise UnsupportedVersionError(
            header, f"api key {header.api_key} version {header.api_version} is not supported"
        )
    try:
        if codec.flexible:
            pos = pos + 1 if buf[pos] == 0 else read_tags(buf, pos, {}, {})
        # Fetch's common shapes skip the generic decoder (fetch_codec.py; None: decode generically).
        if header[0] == _FETCH and _FAST_FETCH_MIN <= header[1] <= _FAST_FETCH_MAX:
            fast = _read_fetch(buf, pos, header[1])
            if fast is not None:
                return _new(Request, (header, fast))
        body, pos = codec.read_request(buf, pos)
    except _DECODE_FAILURES as e:
        raise InvalidRequestError(header, f"malformed {_name(header.api_key)} request: {e}") from None
    # Bytes after the body are ignored, as Kafka's AbstractRequest.parseRequest does (it never checks
    # what remains): librdkafka's AlterUserScramCredentials writes its tag buffer twice.
    return _new(Request, (header, body))


def _name(api_key: int) -> str:
    api = SCHEMAS.get(api_key)
    return api.name if api else str(api_key)


def _finish(out: p.Out) -> list[Chunk]:
    """Patch the size prefix and hand back the chunks (bytes runs coalesced, refs on their own)."""
    if not out.chunks:
        _pack_size_into(out, 0, len(out) - 4)
        return [bytes(out)]
    chunks: list[Any] = list(out.chunks)
    if out:
        chunks.append(bytes(out))
    total = sum(len(c) if isinstance(c, (bytes, bytearray)) else int(c.size) for c in chunks)
    first = chunks[0]
    _pack_size_into(first, 0, total - 4)
    chunks[0] = bytes(first)
    return chunks


def encode_response(header: RequestHeader, body: Mapping[str, Any]) -> list[Chunk]:
    """The whole response, size prefix included, as bytes runs and RecordsRef chunks."""
    api_key = header.api_key
    codec = _COMPILED_GET((api_key, header.api_version)) or _CODECS_GET((api_key, header.api_version))
    if codec is None:
        raise ValueError(f"no schema for api {api_key} v{header.api_version}")
    # Size placeholder and correlation id in one pack (+ response header v1's empty tagged fields).
    if codec.flexible and api_key != _API_VERSIONS:
        head = _RESP_HEAD_V1.pack(0, header.correlation_id, 0)
    else:
        head = _RESP_HEAD_V0.pack(0, header.correlation_id)
    out = p.Out()  # Out() then += is ~10 ns cheaper than Out(head)
    out += head
    # Fetch's usual answer skips the generic encoder (fetch_codec.py; False: start again generically).
    if api_key == _FETCH and _FAST_FETCH_MIN <= header.api_version <= _FAST_FETCH_MAX:
        if _write_fetch(out, body, header.api_version):
            return _finish(out)
        out = p.Out()
        out += head
    codec.write_response(out, body)
    return _finish(out)


def encode_response_bytes(header: RequestHeader, body: Mapping[str, Any]) -> bytes:
    """encode_response for bodies without RecordsRef chunks (tests, tools)."""
    chunks = encode_response(header, body)
    if len(chunks) == 1 and isinstance(chunks[0], bytes):
        return chunks[0]
    raise ValueError("response holds RecordsRef chunks; use encode_response")


def api_versions_fallback_response(correlation_id: int, max_version: int) -> bytes:
    """KIP-511: the answer to an ApiVersions request of a version above ours, size prefix included.

    Response header v0, then a v0-layout body: error_code UNSUPPORTED_VERSION and one api_keys entry
    {ApiVersions, 0, max_version}, so any client can read it and retry at a version we speak.
    """
    body = struct.pack(">hi3h", ErrorCode.UNSUPPORTED_VERSION, 1, ApiKey.API_VERSIONS, 0, max_version)
    return struct.pack(">ii", 4 + len(body), correlation_id) + body


def encode_request(header: RequestHeader, body: Mapping[str, Any]) -> bytes:
    """A whole request, size prefix included (tools, follower fetchers, tests)."""
    codec = _codec(header.api_key, header.api_version)
    out = p.Out()
    out += b"\0\0\0\0"
    out += _HEAD.pack(header.api_key, header.api_version, header.correlation_id)
    if not _uses_header_v0(header.api_key, header.api_version):
        _write_client_id(out, header.client_id)
        if codec.flexible:
            out.append(0)
    codec.write_request(out, body)
    if out.chunks:
        raise ValueError("requests cannot hold RecordsRef chunks")
    struct.pack_into(">i", out, 0, len(out) - 4)
    return bytes(out)


def decode_response(
    api_key: int, api_version: int, frame: bytes | bytearray | memoryview
) -> tuple[int, dict[str, Any]]:
    """Decode one response frame (no size prefix): (correlation_id, body)."""
    codec = _codec(api_key, api_version)
    buf = memoryview(frame)
    try:
        correlation_id = p.I32.unpack_from(buf, 0)[0]
        pos = 4
        if codec.flexible and api_key != _API_VERSIONS:
            pos = read_tags(buf, pos, {}, {})
        body, pos = codec.read_response(buf, pos)
    except _DECODE_FAILURES as e:
        if isinstance(e, ProtocolDecodeError):
            raise
        raise ProtocolDecodeError(f"malformed {_name(api_key)} response: {e}") from None
    if pos != len(buf):
        raise ProtocolDecodeError(f"{len(buf) - pos} trailing bytes after the response body")
    return correlation_id, body
