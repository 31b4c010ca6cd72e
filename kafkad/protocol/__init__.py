"""kafkad's Kafka wire codec, sans-IO: bytes in, dicts out (see docs/interfaces.md "protocol")."""

from kafkad.protocol.codec import (
    Chunk,
    RecordsRef,
    Request,
    RequestHeader,
    api_versions_fallback_response,
    decode_request,
    decode_request_header,
    decode_response,
    encode_request,
    encode_response,
    encode_response_bytes,
)
from kafkad.protocol.compiler import UNKNOWN_TAGS
from kafkad.protocol.errors import (
    ErrorCode,
    InvalidRequestError,
    KafkaError,
    ProtocolDecodeError,
    ProtocolError,
    UnsupportedVersionError,
)
from kafkad.protocol.registry import SCHEMAS, ApiKey
from kafkad.protocol.schema import Api, ApiSchema, Field

__all__ = [
    "SCHEMAS",
    "UNKNOWN_TAGS",
    "Api",
    "ApiKey",
    "ApiSchema",
    "Chunk",
    "ErrorCode",
    "Field",
    "InvalidRequestError",
    "KafkaError",
    "ProtocolDecodeError",
    "ProtocolError",
    "RecordsRef",
    "Request",
    "RequestHeader",
    "UnsupportedVersionError",
    "api_versions_fallback_response",
    "decode_request",
    "decode_request_header",
    "decode_response",
    "encode_request",
    "encode_response",
    "encode_response_bytes",
]
