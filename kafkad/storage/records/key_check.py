"""Null-key scan of a v2 batch: what a compacted topic must refuse (Kafka `LogValidator.validateKey`).

Only produces to compacted topics pay for this; every other topic's hot path never looks at records.
The scan walks the record framing without building records (see records.py for the layout):

    length varint | attributes i8 | timestampDelta varlong | offsetDelta varint | keyLen varint | ...

Per record it decodes the length (to find the next record), skips attributes and the two deltas
(one-byte varints inline, longer ones in a helper), and looks at one bit: a zig-zag varint is negative
iff bit 0 of its *first* byte is set, and a negative keyLen is a null key (Kafka reads any keyLen < 0 as
null). Key, value and headers are never read; no record objects are built.

A compressed batch's records blob is decompressed first with the codecs of codecs.py, never to more than
`max_size` bytes (a decompression bomb raises DecompressedSizeExceeded, a KafkaError(CORRUPT_MESSAGE),
so the produce handler refuses the partition with nothing appended).

Control batches (transaction markers) are exempt, as in Kafka. Framing that cannot be walked (a record
running past the end, too few or too many bytes for recordsCount) raises KafkaError(INVALID_RECORD);
undecodable compressed data raises KafkaError(CORRUPT_MESSAGE). The batch header and CRC are expected to
have been checked already (validate_client_batches).
"""

from __future__ import annotations

from kafkad.protocol.errors import ErrorCode, KafkaError
from kafkad.storage.records.batch import (
    BATCH_OVERHEAD,
    COMPRESSION_MASK,
    CONTROL_FLAG,
    HEADER_STRUCT,
    LOG_OVERHEAD,
    MIN_RECORD_SIZE,
    Buffer,
    Compression,
)
from kafkad.storage.records.codecs import MAX_DECOMPRESSED_BYTES, decompress
from kafkad.storage.records.varint import read_varint

# Header fields used here: batchLength (index 1), attributes (5), recordsCount (12).
_unpack_header_from = HEADER_STRUCT.unpack_from


def first_null_key(batch: Buffer, pos: int = 0, max_size: int = MAX_DECOMPRESSED_BYTES) -> int | None:
    """Index within the batch at `pos` of its first record with a null key; None if every key is set."""
    found = _scan(batch, pos, max_size, first_only=True)
    return found[0] if found else None


def null_key_indexes(batch: Buffer, pos: int = 0, max_size: int = MAX_DECOMPRESSED_BYTES) -> list[int]:
    """Indexes within the batch at `pos` of all its records with a null key (Kafka reports each one)."""
    return _scan(batch, pos, max_size, first_only=False)


def _scan(batch: Buffer, pos: int, max_size: int, *, first_only: bool) -> list[int]:
    fields = _unpack_header_from(batch, pos)
    attributes = fields[5]
    if attributes & CONTROL_FLAG:
        return []
    count = fields[12]
    end = pos + fields[1] + LOG_OVERHEAD
    if end > len(batch) or end < pos + BATCH_OVERHEAD:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"record batch at {pos} has bad size {end - pos}")
    codec = attributes & COMPRESSION_MASK
    if codec == Compression.NONE:
        # bytes index faster than a memoryview; one 16 KiB copy costs far less than the walk.
        data = bytes(batch[pos + BATCH_OVERHEAD : end])
    else:
        if codec > Compression.ZSTD:
            raise KafkaError(ErrorCode.INVALID_RECORD, f"unknown compression type id {codec}")
        view = batch if isinstance(batch, memoryview) else memoryview(batch)
        data = decompress(Compression(codec), view[pos + BATCH_OVERHEAD : end], max_size)
    if count < 0 or count * MIN_RECORD_SIZE > len(data):
        raise KafkaError(ErrorCode.INVALID_RECORD, f"{count} records cannot fit in {len(data)} bytes")
    return _walk(data, count, first_only)


def _walk(data: bytes, count: int, first_only: bool) -> list[int]:
    """The hot loop, kept flat: the common one- and two-byte varints are read inline (no calls)."""
    found: list[int] = []
    pos = 0
    try:
        for index in range(count):
            # Record length: `nxt` is where the next record starts, `p` is just past attributes.
            b = data[pos]
            if b < 0x80:
                nxt = pos + 1 + (b >> 1)
                p = pos + 2
            elif data[pos + 1] < 0x80:
                nxt = pos + 2 + (((b & 0x7F) | (data[pos + 1] << 7)) >> 1)
                p = pos + 3
            else:  # a record of 8 KiB or more
                length, after = read_varint(data, pos)  # negative lengths fail on `b & 1` below
                nxt = after + length
                p = after + 1
            if data[p] < 0x80:  # timestampDelta
                p += 1
            else:
                p = _skip_varint(data, p)
            if data[p] < 0x80:  # offsetDelta
                p += 1
            else:
                p = _skip_varint(data, p)
            # b & 1: a negative length (zig-zag sign bit). A record running past the end of the data
            # fails at the next record (IndexError) or at the final position check.
            if b & 1 or p >= nxt:
                raise KafkaError(ErrorCode.INVALID_RECORD, f"record {index}: bad length")
            if data[p] & 1:  # zig-zag sign bit: keyLen < 0, a null key
                found.append(index)
                if first_only:
                    return found
            pos = nxt
    except IndexError:
        raise KafkaError(ErrorCode.INVALID_RECORD, "record framing runs past the end of the batch") from None
    if pos != len(data):
        raise KafkaError(ErrorCode.INVALID_RECORD, f"records end at {pos} of {len(data)} bytes")
    return found


def _skip_varint(data: bytes, pos: int) -> int:
    """The position after the varint at `pos`."""
    start = pos
    while data[pos] & 0x80:
        pos += 1
        if pos - start >= 10:
            raise KafkaError(ErrorCode.INVALID_RECORD, f"varint longer than 10 bytes at {start}")
    return pos + 1
