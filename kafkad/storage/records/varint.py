"""Zig-zag varints of record bodies (protobuf-style, Kafka's `ByteUtils.readVarint/writeVarlong`).

Unlike the protocol's compact lengths (unsigned varints), every varint inside a record is signed and
zig-zag encoded: 0 -> 0, -1 -> 1, 1 -> 2, ...
"""

from __future__ import annotations

from kafkad.protocol.errors import ErrorCode, KafkaError

_MAX_SHIFT = 63  # a varlong takes at most 10 bytes


def read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    """Decode the zig-zag varint at `pos`: (value, position after it)."""
    try:
        b = buf[pos]
        pos += 1
        if b < 0x80:
            return (b >> 1) ^ -(b & 1), pos
        result = b & 0x7F
        shift = 7
        while True:
            b = buf[pos]
            pos += 1
            result |= (b & 0x7F) << shift
            if b < 0x80:
                return (result >> 1) ^ -(result & 1), pos
            shift += 7
            if shift > _MAX_SHIFT:
                raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"varint longer than 10 bytes at {pos}")
    except IndexError:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"truncated varint at {pos}") from None


def encode_varint(value: int) -> bytes:
    """Zig-zag encode a signed 64-bit value."""
    n = (value << 1) ^ (value >> 63)
    if n < 0x80:
        return bytes((n,))
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def varint_size(value: int) -> int:
    n = (value << 1) ^ (value >> 63)
    size = 1
    while n >= 0x80:
        n >>= 7
        size += 1
    return size
