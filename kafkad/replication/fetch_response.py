"""The follower's Fetch v11 response, decoded without the schema codec (a per-fetch cost cut).

A fetcher reads one response per Fetch; the codec builds a dict per partition and per aborted
transaction it never looks at. `decode_fetch_response` walks the frame with a few struct unpacks and
returns the top-level error code and, per partition, the fields the fetcher uses; `records` is a
memoryview into the frame (no copy), None when the leader sent none. Any malformed frame raises
ProtocolDecodeError, as the codec would.

Layout (Fetch v11 response, not flexible; the frame starts at the response header's correlation id):
correlation_id i32, throttle_time_ms i32, error_code i16, session_id i32, responses [topic string,
partitions [partition_index i32, error_code i16, high_watermark i64, last_stable_offset i64,
log_start_offset i64, aborted_transactions nullable [producer_id i64, first_offset i64],
preferred_read_replica i32, records nullable bytes]].
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from kafkad.protocol import ProtocolDecodeError

_HEAD = struct.Struct(">iihi")  # correlation_id, throttle_time_ms, error_code, session_id
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
_PARTITION = struct.Struct(">ihqqqi")  # partition_index .. log_start_offset, aborted count
_TAIL = struct.Struct(">ii")  # preferred_read_replica, records length
_ABORTED = 16  # bytes of one aborted transaction entry


class FetchedPartition(NamedTuple):
    topic: str
    partition: int
    error_code: int
    high_watermark: int
    log_start_offset: int
    records: memoryview | None


def decode_fetch_response(frame: bytearray) -> tuple[int, list[FetchedPartition]]:
    """(top-level error_code, partitions) of a Fetch v11 response frame (size prefix excluded)."""
    error_code, _, partitions = decode_fetch_response_session(frame)
    return error_code, partitions


def decode_fetch_response_session(frame: bytearray) -> tuple[int, int, list[FetchedPartition]]:
    """(top-level error_code, session_id, partitions) of a Fetch v11 response frame."""
    try:
        return _decode(memoryview(frame))
    except (struct.error, UnicodeDecodeError, ValueError) as e:
        raise ProtocolDecodeError(f"malformed Fetch v11 response: {e}") from None


def _decode(view: memoryview) -> tuple[int, int, list[FetchedPartition]]:
    size = len(view)
    _, _, error_code, session_id = _HEAD.unpack_from(view, 0)
    pos = _HEAD.size
    (topics,) = _I32.unpack_from(view, pos)
    pos += 4
    out: list[FetchedPartition] = []
    part_unpack = _PARTITION.unpack_from
    tail_unpack = _TAIL.unpack_from
    for _ in range(topics):
        (name_len,) = _I16.unpack_from(view, pos)
        pos += 2
        if name_len < 0 or pos + name_len > size:
            raise ValueError("topic name out of the frame")
        topic = str(view[pos : pos + name_len], "utf-8")
        pos += name_len
        (count,) = _I32.unpack_from(view, pos)
        pos += 4
        for _ in range(count):
            index, code, hw, _, log_start, aborted = part_unpack(view, pos)
            pos += _PARTITION.size
            if aborted > 0:
                pos += aborted * _ABORTED
            _, length = tail_unpack(view, pos)
            pos += _TAIL.size
            records = None
            if length >= 0:
                if pos + length > size:
                    raise ValueError("records run past the frame")
                records = view[pos : pos + length]
                pos += length
            out.append(FetchedPartition(topic, index, code, hw, log_start, records))
    if pos != size:
        raise ValueError(f"{size - pos} bytes after the last partition")
    return error_code, session_id, out
