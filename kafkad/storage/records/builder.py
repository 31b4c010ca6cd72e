"""Build v2 record batches (tests, tools, transaction markers, the console producer).

Records get offset deltas 0..n-1 and timestamp deltas from the base timestamp (the first record's
timestamp unless given). The records are encoded, compressed as one blob if asked, then the header is
packed and the CRC-32C computed over attributes..end.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from kafkad.storage.crc import crc32c
from kafkad.storage.records.batch import (
    ATTRIBUTES_OFFSET,
    BATCH_OVERHEAD,
    COMPRESSION_MASK,
    CONTROL_FLAG,
    CRC_OFFSET,
    HEADER_STRUCT,
    LOG_OVERHEAD,
    MAGIC,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_FLAG,
    Compression,
    TimestampType,
)
from kafkad.storage.records.codecs import compress
from kafkad.storage.records.records import ControlRecordType
from kafkad.storage.records.varint import encode_varint

_UINT32 = struct.Struct(">I")
_CONTROL_KEY = struct.Struct(">hh")
_TXN_MARKER_VALUE = struct.Struct(">hi")
_NULL = encode_varint(-1)


class RecordLike(Protocol):
    """What build_batch needs of a record: SimpleRecord, or a decoded Record (to re-encode)."""

    @property
    def key(self) -> bytes | None: ...
    @property
    def value(self) -> bytes | None: ...
    @property
    def headers(self) -> Sequence[tuple[str, bytes | None]]: ...
    @property
    def timestamp(self) -> int: ...


@dataclass(frozen=True, slots=True)
class SimpleRecord:
    key: bytes | None = None
    value: bytes | None = None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    timestamp: int = -1


def encode_record(record: RecordLike, offset_delta: int, base_timestamp: int) -> bytes:
    """One record, length prefix included."""
    parts = [b"\x00", encode_varint(record.timestamp - base_timestamp), encode_varint(offset_delta)]
    for blob in (record.key, record.value):
        if blob is None:
            parts.append(_NULL)
        else:
            parts.append(encode_varint(len(blob)))
            parts.append(blob)
    parts.append(encode_varint(len(record.headers)))
    for name, value in record.headers:
        raw = name.encode()
        parts.append(encode_varint(len(raw)))
        parts.append(raw)
        if value is None:
            parts.append(_NULL)
        else:
            parts.append(encode_varint(len(value)))
            parts.append(value)
    body = b"".join(parts)
    return encode_varint(len(body)) + body


def build_batch(
    records: Iterable[RecordLike],
    *,
    compression: Compression = Compression.NONE,
    base_offset: int = 0,
    base_timestamp: int | None = None,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    partition_leader_epoch: int = -1,
    is_transactional: bool = False,
    is_control: bool = False,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
) -> bytes:
    """Encode `records` as one v2 batch (at least one record)."""
    items = list(records)
    if not items:
        raise ValueError("a record batch needs at least one record")
    if base_timestamp is None:
        base_timestamp = items[0].timestamp
    max_timestamp = max(r.timestamp for r in items)
    data = b"".join(encode_record(r, i, base_timestamp) for i, r in enumerate(items))
    payload = compress(compression, data)
    attributes = int(compression) & COMPRESSION_MASK
    if timestamp_type is TimestampType.LOG_APPEND_TIME:
        attributes |= TIMESTAMP_TYPE_MASK
    if is_transactional:
        attributes |= TRANSACTIONAL_FLAG
    if is_control:
        attributes |= CONTROL_FLAG
    size = BATCH_OVERHEAD + len(payload)
    out = bytearray(size)
    HEADER_STRUCT.pack_into(
        out,
        0,
        base_offset,
        size - LOG_OVERHEAD,
        partition_leader_epoch,
        MAGIC,
        0,
        attributes,
        len(items) - 1,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        len(items),
    )
    out[BATCH_OVERHEAD:] = payload
    _UINT32.pack_into(out, CRC_OFFSET, crc32c(memoryview(out)[ATTRIBUTES_OFFSET:]))
    return bytes(out)


def build_control_batch(
    control_type: ControlRecordType,
    *,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    timestamp: int,
    base_offset: int = 0,
    partition_leader_epoch: int = -1,
) -> bytes:
    """A transaction marker batch (transactional + control, one record), as the coordinator writes."""
    record = SimpleRecord(
        key=_CONTROL_KEY.pack(0, control_type),
        value=_TXN_MARKER_VALUE.pack(0, coordinator_epoch),
        timestamp=timestamp,
    )
    return build_batch(
        [record],
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        partition_leader_epoch=partition_leader_epoch,
        is_transactional=True,
        is_control=True,
    )
