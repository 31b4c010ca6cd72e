"""Compression codecs of record batches, all through `cramjam`.

A compressed v2 batch holds its records as one blob after the 61-byte header. Formats per codec:
- gzip: a gzip member (RFC 1952).
- snappy: Java clients (snappy-java `SnappyOutputStream`) write the *xerial* framing: the 8-byte magic
  b"\\x82SNAPPY\\x00", int32 version, int32 compatible version, then blocks of int32 length + raw snappy.
  librdkafka and kafka-python may also send plain raw snappy. We decode both and encode raw.
- lz4: the LZ4 frame format (KafkaLZ4BlockOutputStream, correct header checksum for magic 2).
- zstd: a zstd frame, possibly without a content size (streamed by zstd-jni).
Errors in compressed data raise KafkaError(CORRUPT_MESSAGE).

Bounded output: batches come from clients, and 1 MiB of zstd can declare gigabytes of zeros (a
"decompression bomb"). `decompress` never materializes more than `max_size` bytes (default
MAX_DECOMPRESSED_BYTES): gzip, lz4 and zstd decompress with cramjam's `decompress_into` into a
preallocated buffer, which fails as soon as the buffer is full (cramjam's message "failed to write
whole buffer"). The buffer starts at the declared size (the first zstd/lz4 frame's content size when
present, gzip's ISIZE trailer; one over the limit fails before decoding), else at a few times the
input, and doubles up to `max_size`: an undeclared size costs about one extra pass at most.
Snappy declares each block's length up front (`decompress_raw_len`), checked before decoding it.
Going over the limit raises DecompressedSizeExceeded, a KafkaError(CORRUPT_MESSAGE).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kafkad.protocol.errors import ErrorCode, KafkaError
from kafkad.storage.records.batch import Compression

if TYPE_CHECKING:
    import cramjam
else:

    class _Cramjam:
        """Stands for the `cramjam` module until the first compressed batch: importing it (a Rust
        extension) costs ~1.6 MB of RSS that a broker whose clients never compress does not need. The
        first attribute read imports it and rebinds this module's `cramjam` global to it, so every later
        call looks it up exactly as a top-level import would (no per-call cost)."""

        def __getattr__(self, name: str) -> Any:
            global cramjam
            import cramjam as module

            cramjam = module
            return getattr(module, name)

    cramjam = _Cramjam()

XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER_SIZE = 16  # magic + version i32 + compatible version i32
_INT32 = struct.Struct(">i")

Buffer = bytes | bytearray | memoryview

# Largest decompressed records blob accepted. Kafka has no cap (it streams records), but it also never
# holds a whole decompressed batch; here the blob is decompressed in one piece, so it must fit in memory
# next to a ~40 MB broker. 64 MiB is 64x the default message.max.bytes (1 MiB, the largest compressed
# batch a client may send): real record data compresses 2-10x, and clients build batches of at most
# a few MB uncompressed (Java batch.size 16 KiB, librdkafka batch.size 1 MB), so only a bomb gets here.
MAX_DECOMPRESSED_BYTES = 64 * 1024 * 1024
_MIN_GUESS = 64 * 1024  # first output buffer without a declared size: max(this, 8x the input)
_GUESS_RATIO = 8
_FULL_BUFFER = "failed to write whole buffer"  # cramjam's error when decompress_into runs out of room
_GZIP_MAGIC = b"\x1f\x8b"
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_LZ4_MAGIC = b"\x04\x22\x4d\x18"


class DecompressedSizeExceeded(KafkaError):
    """A compressed records blob expands to more than the allowed size (a decompression bomb)."""

    def __init__(self, codec: Compression, limit: int) -> None:
        super().__init__(
            ErrorCode.CORRUPT_MESSAGE, f"{codec.name} data decompresses to more than {limit} bytes"
        )
        self.limit = limit


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


def decompress(codec: Compression, data: Buffer, max_size: int = MAX_DECOMPRESSED_BYTES) -> bytes:
    """Inverse of `compress`, accepting every framing real clients send; never more than `max_size`
    bytes of output (DecompressedSizeExceeded past it, with at most `max_size` bytes allocated)."""
    try:
        match codec:
            case Compression.NONE:
                return bytes(data)
            case Compression.GZIP:
                hint = _gzip_size(data)
                return _bounded(codec, cramjam.gzip.decompress_into, data, hint, max_size)
            case Compression.SNAPPY:
                return _snappy_decompress(data, max_size)
            case Compression.LZ4:
                hint = _lz4_content_size(data)
                return _bounded(codec, cramjam.lz4.decompress_into, data, hint, max_size)
            case Compression.ZSTD:
                hint = _zstd_content_size(data)
                return _bounded(codec, cramjam.zstd.decompress_into, data, hint, max_size)
    except cramjam.DecompressionError as exc:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"{codec.name} data: {exc}") from exc
    raise KafkaError(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, f"codec {codec}")


def _bounded(
    codec: Compression,
    decompress_into: Callable[[Buffer, bytearray], int],
    data: Buffer,
    hint: int | None,
    max_size: int,
) -> bytes:
    """Decompress into a buffer that starts at `hint` (or a guess) and doubles up to `max_size`."""
    if hint is not None and hint > max_size:
        raise DecompressedSizeExceeded(codec, max_size)  # declared too big: not even tried
    guess = hint if hint is not None else _GUESS_RATIO * len(data)
    size = min(max_size, max(_MIN_GUESS, guess))
    while True:
        out = bytearray(size)
        try:
            n = decompress_into(data, out)
        except cramjam.DecompressionError as exc:
            if _FULL_BUFFER not in str(exc):
                raise
            if size >= max_size:
                raise DecompressedSizeExceeded(codec, max_size) from None
            del out  # free before the bigger one: peak memory stays at one buffer
            size = min(max_size, 2 * size)
            continue
        # decompress_into fills the buffer or fails, so n == size means the output fit exactly.
        return bytes(memoryview(out)[:n])


def _gzip_size(data: Buffer) -> int | None:
    """ISIZE of the last gzip member (RFC 1952: the trailer's uncompressed size mod 2**32), which the
    decoder verifies; a lower bound of the output, so one over the limit already fails."""
    if len(data) < 18 or bytes(data[:2]) != _GZIP_MAGIC:
        return None
    return int.from_bytes(data[len(data) - 4 :], "little")


def _zstd_content_size(data: Buffer) -> int | None:
    """Frame_Content_Size of the first zstd frame (RFC 8878 3.1.1.1), None when absent."""
    if len(data) < 6 or bytes(data[:4]) != _ZSTD_MAGIC:
        return None
    fhd = data[4]
    single_segment = (fhd >> 5) & 1
    pos = 5 + (0 if single_segment else 1) + (0, 1, 2, 4)[fhd & 3]
    width = (single_segment, 2, 4, 8)[fhd >> 6]
    if width == 0 or len(data) < pos + width:
        return None
    value = int.from_bytes(data[pos : pos + width], "little")
    return value + 256 if width == 2 else value


def _lz4_content_size(data: Buffer) -> int | None:
    """Content Size of the first LZ4 frame (FLG bit 3), None when absent."""
    if len(data) < 14 or bytes(data[:4]) != _LZ4_MAGIC or not data[4] & 0x08:
        return None
    return int.from_bytes(data[6:14], "little")


def _snappy_decompress(data: Buffer, max_size: int) -> bytes:
    view = data if isinstance(data, memoryview) else memoryview(data)
    if bytes(view[: len(XERIAL_MAGIC)]) != XERIAL_MAGIC:
        if cramjam.snappy.decompress_raw_len(view) > max_size:
            raise DecompressedSizeExceeded(Compression.SNAPPY, max_size)
        return bytes(cramjam.snappy.decompress_raw(view))
    return xerial_decompress(view, max_size)


def xerial_decompress(view: memoryview, max_size: int = MAX_DECOMPRESSED_BYTES) -> bytes:
    """Decode snappy-java's stream framing: header, then length-prefixed raw snappy blocks."""
    if len(view) < _XERIAL_HEADER_SIZE:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "truncated xerial snappy header")
    out: list[bytes] = []
    total = 0
    pos = _XERIAL_HEADER_SIZE
    end = len(view)
    while pos < end:
        if end - pos < 4:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "truncated xerial snappy block length")
        (length,) = _INT32.unpack_from(view, pos)
        pos += 4
        if length < 0 or length > end - pos:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"bad xerial snappy block length {length}")
        block = view[pos : pos + length]
        total += cramjam.snappy.decompress_raw_len(block)  # declared, checked before decoding
        if total > max_size:
            raise DecompressedSizeExceeded(Compression.SNAPPY, max_size)
        out.append(bytes(cramjam.snappy.decompress_raw(block)))
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
