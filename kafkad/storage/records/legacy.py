"""Message format v0/v1 (Kafka's message sets before record batches, magic 0 and 1): parse and check
(CRC-32 of each message, compressed wrappers opened one level deep), up-convert to one v2 batch for
Produce v0-2, and down-convert stored v2 batches for Fetch v0-3 (Kafka's LogValidator and
down-conversion, with message.downconversion.enable's default true).

A message (Kafka's LegacyRecord)::

    offset int64 | size int32 | crc uint32 | magic int8 | attributes int8 | [timestamp int64, magic 1]
    | key bytes (int32 length, -1 null) | value bytes

attributes: bits 0-2 the codec (gzip 1, snappy 2, lz4 3) of a wrapper whose value is a compressed message
set; bit 3 (magic 1) log-append time. Inner messages of a magic 1 wrapper carry relative offsets.
Anything malformed (a CRC mismatch, a truncated message, a compressed wrapper hiding garbage or another
wrapper) is CORRUPT_MESSAGE, so nothing of the request is stored. Up-converted batches are uncompressed
(the records are decompressed to be checked anyway); headers do not exist below v2, and down-conversion
drops them, as Kafka does. CPU work proportional to the records: the handlers run it off the hot path.
"""

from __future__ import annotations

import struct
import zlib
from typing import NamedTuple

from kafkad.protocol.errors import ErrorCode, KafkaError
from kafkad.storage.records.batch import Compression, TimestampType
from kafkad.storage.records.builder import SimpleRecord, build_batch
from kafkad.storage.records.records import decode_batch, iter_headers

_HEAD = struct.Struct(">qiIbb")  # offset, size, crc, magic, attributes
_LOG_OVERHEAD = 12  # offset + size
_MIN_SIZE = {0: 14, 1: 22}  # crc magic attributes [timestamp] key-length value-length
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_CODECS = {1: Compression.GZIP, 2: Compression.SNAPPY, 3: Compression.LZ4}
_LOG_APPEND_TIME = 0x08


class LegacyMessage(NamedTuple):
    offset: int
    timestamp: int  # -1 for magic 0
    key: bytes | None
    value: bytes | None


def _corrupt(what: str) -> KafkaError:
    return KafkaError(ErrorCode.CORRUPT_MESSAGE, f"message format v0/v1: {what}")


def _bytes(buf: memoryview, pos: int, end: int) -> tuple[bytes | None, int]:
    if end - pos < 4:
        raise _corrupt("truncated length")
    (n,) = _I32.unpack_from(buf, pos)
    pos += 4
    if n == -1:
        return None, pos
    if n < 0 or pos + n > end:
        raise _corrupt(f"bad length {n}")
    return bytes(buf[pos : pos + n]), pos + n


def magic_of(buf: memoryview) -> int:
    """The magic byte of the first message/batch of a produce payload (v0/v1/v2 share its position)."""
    if len(buf) < _HEAD.size:
        raise _corrupt("shorter than a message header")
    return int(buf[16])


def parse_message_set(data: bytes | bytearray | memoryview, *, nested: bool = False) -> list[LegacyMessage]:
    """Every message of a v0/v1 message set, compressed wrappers opened; raises CORRUPT_MESSAGE."""
    buf = memoryview(data)
    out: list[LegacyMessage] = []
    pos, end = 0, len(buf)
    while pos < end:
        if end - pos < _HEAD.size:
            raise _corrupt("truncated message header")
        offset, size, crc, magic, attributes = _HEAD.unpack_from(buf, pos)
        if magic not in _MIN_SIZE:
            raise _corrupt(f"magic {magic} inside a v0/v1 message set")
        body_end = pos + _LOG_OVERHEAD + size
        if size < _MIN_SIZE[magic] or body_end > end:
            raise _corrupt(f"bad message size {size}")
        if zlib.crc32(buf[pos + 16 : body_end]) != crc:
            raise _corrupt(f"CRC mismatch in the message at offset {offset}")
        p = pos + _HEAD.size
        timestamp = -1
        if magic == 1:
            (timestamp,) = _I64.unpack_from(buf, p)
            p += 8
        key, p = _bytes(buf, p, body_end)
        value, p = _bytes(buf, p, body_end)
        if p != body_end:
            raise _corrupt("trailing bytes in a message")
        codec = attributes & 0x07
        if codec:
            if nested or codec not in _CODECS or value is None:
                raise _corrupt(f"bad compressed wrapper (codec {codec})")
            try:
                inner = parse_message_set(_decompress(_CODECS[codec], value), nested=True)
            except KafkaError:
                raise
            except Exception as e:  # a codec's own error on garbage
                raise _corrupt(f"compressed wrapper does not decompress: {e}") from None
            if not inner:
                raise _corrupt("empty compressed wrapper")
            if magic == 1 and attributes & _LOG_APPEND_TIME:
                inner = [m._replace(timestamp=timestamp) for m in inner]
            out.extend(inner)
        else:
            out.append(LegacyMessage(offset, timestamp, key, value))
        pos = body_end
    return out


def _decompress(codec: Compression, value: bytes) -> bytes:
    from kafkad.storage.records.codecs import decompress

    return decompress(codec, memoryview(value))


def up_convert(data: bytes | bytearray | memoryview) -> bytearray:
    """A Produce v0-2 message set as one uncompressed v2 batch (offsets are assigned on append)."""
    messages = parse_message_set(data)
    if not messages:
        raise KafkaError(ErrorCode.INVALID_RECORD, "empty message set")
    return bytearray(build_batch([SimpleRecord(m.key, m.value, timestamp=m.timestamp) for m in messages]))


def _message(
    out: bytearray,
    magic: int,
    offset: int,
    timestamp: int,
    attributes: int,
    key: bytes | None,
    value: bytes | None,
) -> None:
    body = bytearray(struct.pack(">bb", magic, attributes))
    if magic == 1:
        body += _I64.pack(timestamp)
    for b in (key, value):
        if b is None:
            body += _I32.pack(-1)
        else:
            body += _I32.pack(len(b))
            body += b
    out += struct.pack(">qiI", offset, len(body) + 4, zlib.crc32(body))
    out += body


def down_convert(data: bytes | bytearray | memoryview, magic: int, first_offset: int = 0) -> bytes:
    """Stored v2 batches as an uncompressed v0 or v1 message set: records below `first_offset` (the
    fetch offset inside the first batch) and control batches are left out; headers are dropped."""
    out = bytearray()
    for header in iter_headers(data):
        if header.is_control:
            continue
        batch = decode_batch(data, header.position)
        log_append = header.timestamp_type is TimestampType.LOG_APPEND_TIME
        attributes = _LOG_APPEND_TIME if magic == 1 and log_append else 0
        for r in batch.records:
            if r.offset < first_offset:
                continue
            ts = header.max_timestamp if log_append else r.timestamp
            _message(out, magic, r.offset, ts, attributes, r.key, r.value)
    return bytes(out)
