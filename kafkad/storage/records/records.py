"""Full decode of v2 record batches, for tools, the Spark bridge and tests (never the produce path).

`decode_batch` parses the header, decompresses the records blob and walks every record:

    length varint | attributes i8 | timestampDelta varlong | offsetDelta varint |
    keyLen varint, key | valueLen varint, value | headerCount varint, (keyLen, key, valLen, val)*

(all zig-zag). offset = baseOffset + offsetDelta; timestamp = baseTimestamp + timestampDelta, or
maxTimestamp for every record of a LogAppendTime batch. Control batches carry one record whose key is
`version i16, type i16` (0 ABORT, 1 COMMIT) and whose value is `version i16, coordinatorEpoch i32`.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from enum import IntEnum

from kafkad.protocol.errors import ErrorCode, KafkaError
from kafkad.storage.records.batch import (
    BATCH_OVERHEAD,
    LOG_OVERHEAD,
    NO_SEQUENCE,
    BatchHeader,
    Buffer,
    TimestampType,
    compute_crc,
    increment_sequence,
    read_header,
)
from kafkad.storage.records.codecs import MAX_DECOMPRESSED_BYTES, decompress
from kafkad.storage.records.varint import read_varint

_CONTROL_KEY = struct.Struct(">hh")
_TXN_MARKER_VALUE = struct.Struct(">hi")

Header = tuple[str, bytes | None]


@dataclass(frozen=True, slots=True)
class Record:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...]
    sequence: int


class ControlRecordType(IntEnum):
    ABORT = 0
    COMMIT = 1


@dataclass(frozen=True, slots=True)
class ControlRecord:
    """A transaction marker: its type and the coordinator epoch that wrote it."""

    version: int
    type: ControlRecordType
    coordinator_epoch: int

    @classmethod
    def from_record(cls, record: Record) -> ControlRecord:
        if record.key is None or len(record.key) < _CONTROL_KEY.size:
            raise KafkaError(ErrorCode.INVALID_RECORD, "control record key too short")
        version, type_id = _CONTROL_KEY.unpack_from(record.key)
        if type_id not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
            raise KafkaError(ErrorCode.INVALID_RECORD, f"unknown control record type {type_id}")
        epoch = -1
        if record.value is not None and len(record.value) >= _TXN_MARKER_VALUE.size:
            epoch = _TXN_MARKER_VALUE.unpack_from(record.value)[1]
        return cls(version, ControlRecordType(type_id), epoch)


@dataclass(frozen=True, slots=True)
class DecodedBatch:
    header: BatchHeader
    records: list[Record]

    @property
    def control_record(self) -> ControlRecord | None:
        """The transaction marker of a control batch, None for a data batch."""
        if not self.header.is_control or not self.records:
            return None
        return ControlRecord.from_record(self.records[0])


def is_crc_valid(buf: Buffer, header: BatchHeader) -> bool:
    """Whether the stored CRC matches the batch (the batch must fit in `buf`)."""
    return compute_crc(buf, header.position, header.size) == header.crc


def decode_batch(
    buf: Buffer, pos: int = 0, *, verify_crc: bool = False, max_size: int = MAX_DECOMPRESSED_BYTES
) -> DecodedBatch:
    """Decode the batch at `pos` and all its records (decompressing them to at most `max_size` bytes:
    DecompressedSizeExceeded past it)."""
    header = read_header(buf, pos)
    size = header.size
    if size < BATCH_OVERHEAD or pos + size > len(buf):
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"record batch at {pos} has bad size {size}")
    if verify_crc and not is_crc_valid(buf, header):
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"CRC mismatch in record batch at {pos}")
    view = buf if isinstance(buf, memoryview) else memoryview(buf)
    data = decompress(header.compression, view[pos + BATCH_OVERHEAD : pos + size], max_size)
    return DecodedBatch(header, _decode_records(header, data))


def iter_headers(buf: Buffer) -> Iterator[BatchHeader]:
    """Headers of the complete batches of a segment buffer, in order; stops at a torn tail.

    No CRC check: pair with `is_crc_valid` (or use `scan_valid_prefix` for recovery).
    """
    pos = 0
    end = len(buf)
    while end - pos >= BATCH_OVERHEAD:
        header = read_header(buf, pos)
        if header.size < BATCH_OVERHEAD or header.size > end - pos:
            return
        yield header
        pos += header.batch_length + LOG_OVERHEAD


def iter_batches(buf: Buffer, *, verify_crc: bool = True) -> Iterator[DecodedBatch]:
    """Decode every complete batch of a segment buffer (a .log file's bytes), in order."""
    for header in iter_headers(buf):
        yield decode_batch(buf, header.position, verify_crc=verify_crc)


def _decode_records(header: BatchHeader, data: bytes) -> list[Record]:
    count = header.records_count
    # Each record takes at least 7 bytes: refuse counts that cannot fit before allocating anything.
    if count < 0 or count * 7 > len(data):
        raise KafkaError(ErrorCode.INVALID_RECORD, f"{count} records cannot fit in {len(data)} bytes of data")
    base_offset = header.base_offset
    base_timestamp = header.base_timestamp
    log_append_time = header.max_timestamp if header.timestamp_type is TimestampType.LOG_APPEND_TIME else None
    base_sequence = header.base_sequence
    records: list[Record] = []
    append = records.append
    pos = 0
    try:
        for _ in range(count):
            length, pos = read_varint(data, pos)
            end = pos + length
            if length < 6 or end > len(data):
                raise KafkaError(ErrorCode.INVALID_RECORD, f"bad record length {length}")
            pos += 1  # attributes: unused
            timestamp_delta, pos = read_varint(data, pos)
            offset_delta, pos = read_varint(data, pos)
            key_len, pos = read_varint(data, pos)
            key = None
            if key_len >= 0:
                key = data[pos : pos + key_len]
                pos += key_len
            value_len, pos = read_varint(data, pos)
            value = None
            if value_len >= 0:
                value = data[pos : pos + value_len]
                pos += value_len
            header_count, pos = read_varint(data, pos)
            headers: tuple[Header, ...] = ()
            if header_count:
                headers, pos = _decode_headers(data, pos, header_count, end)
            if pos != end:
                raise KafkaError(
                    ErrorCode.INVALID_RECORD,
                    f"record at offset delta {offset_delta}: read {length - end + pos} of {length} bytes",
                )
            sequence = (
                NO_SEQUENCE
                if base_sequence == NO_SEQUENCE
                else increment_sequence(base_sequence, offset_delta)
            )
            append(
                Record(
                    base_offset + offset_delta,
                    log_append_time if log_append_time is not None else base_timestamp + timestamp_delta,
                    key,
                    value,
                    headers,
                    sequence,
                )
            )
    except UnicodeDecodeError as exc:
        raise KafkaError(ErrorCode.INVALID_RECORD, f"header key is not UTF-8: {exc}") from exc
    if pos != len(data):
        raise KafkaError(ErrorCode.INVALID_RECORD, f"{len(data) - pos} bytes left after {count} records")
    return records


def _decode_headers(data: bytes, pos: int, count: int, end: int) -> tuple[tuple[Header, ...], int]:
    if count < 0 or count * 2 > end - pos:
        raise KafkaError(ErrorCode.INVALID_RECORD, f"bad header count {count}")
    headers: list[Header] = []
    for _ in range(count):
        key_len, pos = read_varint(data, pos)
        if key_len < 0 or pos + key_len > end:
            raise KafkaError(ErrorCode.INVALID_RECORD, f"bad header key length {key_len}")
        key = data[pos : pos + key_len].decode()
        pos += key_len
        value_len, pos = read_varint(data, pos)
        value = None
        if value_len >= 0:
            if pos + value_len > end:
                raise KafkaError(ErrorCode.INVALID_RECORD, f"bad header value length {value_len}")
            value = data[pos : pos + value_len]
            pos += value_len
        headers.append((key, value))
    return tuple(headers), pos


def read_marker(buf: Buffer, pos: int) -> tuple[bool, int]:
    """(aborted, coordinator epoch) of the control batch at `pos` of `buf`, from its one record's key
    and value without decoding the batch (control batches are never compressed). KafkaError
    (INVALID_RECORD) if it is not a transaction marker."""
    buf = bytes(buf[pos : pos + BATCH_OVERHEAD + 64])  # the header and the one small record
    try:
        p = BATCH_OVERHEAD
        _, p = read_varint(buf, p)  # record length
        p += 1  # attributes
        _, p = read_varint(buf, p)  # timestamp delta
        _, p = read_varint(buf, p)  # offset delta
        key_len, p = read_varint(buf, p)
        if key_len < _CONTROL_KEY.size:
            raise ValueError("control record key too short")
        _, type_id = _CONTROL_KEY.unpack_from(buf, p)
        p += key_len
        value_len, p = read_varint(buf, p)
        epoch = _TXN_MARKER_VALUE.unpack_from(buf, p)[1] if value_len >= _TXN_MARKER_VALUE.size else -1
    except (ValueError, IndexError, struct.error) as exc:
        raise KafkaError(ErrorCode.INVALID_RECORD, f"unreadable control record: {exc}") from None
    if type_id not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        raise KafkaError(ErrorCode.INVALID_RECORD, f"unknown control record type {type_id}")
    return type_id == ControlRecordType.ABORT, epoch
