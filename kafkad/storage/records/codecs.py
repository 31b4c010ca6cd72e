"""Compression codecs of record batches, all through `cramjam`.

A compressed v2 batch holds its records as one blob after the 61-byte header. Formats per codec:
- gzip: a gzip member (RFC 1952).
- snappy: Java clients (snappy-java `SnappyOutputStream`) write the *xerial* framing: the 8-byte magic
  b"\\x82SNAPPY\\x00", int32 version, int32 compatible version, then blocks of int32 length + raw snappy.
  librdkafka and kafka-python may also send plain raw snappy. We decode both and encode raw.
- lz4: the LZ4 frame format (KafkaLZ4BlockOutputStream, correct header checksum for magic 2).
- zstd: a zstd frame, possibly without a content size (streamed by zstd-jni).
Errors in compressed data raise KafkaError(CORRUPT_MESSAGE).
"""

from __future__ import annotations

import struct

import cramjam

from kafkad.protocol.errors import ErrorCode, KafkaError
from kafkad.storage.records.batch import Compression

XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER_SIZE = 16  # magic + version i32 + compatible version i32
_INT32 = struct.Struct(">i")

Buffer = bytes | bytearray | memoryview


def compress(codec: Compression, data: Buffer) -> bytes:
    """Compress `data` for a batch of codec `codec` (NONE returns it unchanged)."""
    match codec:
        case Compression.NONE:
            return bytes(data)
        case Compression.GZIP:
            return bytes(cramjam.gzip.compress(data))
        case Compression.SNAPPY:
            return bytes(cramjam.snappy.compress_raw(data))
        case Compression.LZ4:
            return bytes(cramjam.lz4.compress(data))
        case Compression.ZSTD:
            return bytes(cramjam.zstd.compress(data))
    raise KafkaError(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, f"codec {codec}")


def decompress(codec: Compression, data: Buffer) -> bytes:
    """Inverse of `compress`, accepting every framing real clients send."""
    try:
        match codec:
            case Compression.NONE:
                return bytes(data)
            case Compression.GZIP:
                return bytes(cramjam.gzip.decompress(data))
            case Compression.SNAPPY:
                return _snappy_decompress(data)
            case Compression.LZ4:
                return bytes(cramjam.lz4.decompress(data))
            case Compression.ZSTD:
                return bytes(cramjam.zstd.decompress(data))
    except cramjam.DecompressionError as exc:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"{codec.name} data: {exc}") from exc
    raise KafkaError(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, f"codec {codec}")


def _snappy_decompress(data: Buffer) -> bytes:
    view = data if isinstance(data, memoryview) else memoryview(data)
    if bytes(view[: len(XERIAL_MAGIC)]) != XERIAL_MAGIC:
        return bytes(cramjam.snappy.decompress_raw(view))
    return xerial_decompress(view)


def xerial_decompress(view: memoryview) -> bytes:
    """Decode snappy-java's stream framing: header, then length-prefixed raw snappy blocks."""
    if len(view) < _XERIAL_HEADER_SIZE:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "truncated xerial snappy header")
    out: list[bytes] = []
    pos = _XERIAL_HEADER_SIZE
    end = len(view)
    while pos < end:
        if end - pos < 4:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "truncated xerial snappy block length")
        (length,) = _INT32.unpack_from(view, pos)
        pos += 4
        if length < 0 or length > end - pos:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"bad xerial snappy block length {length}")
        out.append(bytes(cramjam.snappy.decompress_raw(view[pos : pos + length])))
        pos += length
    return b"".join(out)


def xerial_compress(data: Buffer, block_size: int = 32 * 1024) -> bytes:
    """snappy-java's framing (version 1, compatible 1), for tests and interoperability."""
    view = data if isinstance(data, memoryview) else memoryview(data)
    parts = [XERIAL_MAGIC, _INT32.pack(1), _INT32.pack(1)]
    for start in range(0, len(view), block_size):
        block = bytes(cramjam.snappy.compress_raw(view[start : start + block_size]))
        parts.append(_INT32.pack(len(block)))
        parts.append(block)
    return b"".join(parts)
