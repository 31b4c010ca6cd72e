"""Fetch's common shapes decoded and encoded without the generic codec (a per-fetch cost cut).

A follower sends a Fetch every round trip and a tailing consumer one per poll, nearly always of one shape:
no tagged fields, no forgotten topics, one or a few topics of fixed-width partition entries. For those
`read_request` walks the frame with a few struct unpacks and builds exactly the body dict the generic codec
(compiler.py) builds, same keys in the same order, absent and tagged fields at their defaults; `None` for
anything else (a tagged field, forgotten topics, a null array or string, a truncated frame, a multi-byte
varint it does not expect), and the caller decodes with the generic codec, which answers or refuses it as
before. Likewise `write_response` writes the handler's usual answer (every partition field present, no
tagged field set) into an `Out` exactly as the generic writer would, and returns False for anything else
(the caller then encodes generically from scratch). Versions 11-17 (kafkad's follower sends v11,
librdkafka 2.16 v11-13, Java 3.x v12-17); tests/unit/protocol/test_fetch_codec.py proves equality with the
generic codec on golden client frames and hypothesis-generated requests and responses of every version.

Fetch v11 request body: replica_id i32, max_wait_ms i32, min_bytes i32, max_bytes i32, isolation_level i8,
session_id i32, session_epoch i32, topics [topic string, partitions [partition i32, current_leader_epoch
i32, fetch_offset i64, log_start_offset i64, partition_max_bytes i32]], forgotten_topics_data [...],
rack_id string. v12 (flexible): compact lengths, last_fetched_epoch i32 after fetch_offset, a tag section
after each partition, topic, forgotten topic and the body. v13: topic_id uuid instead of the topic's name.
v15: no replica_id (it moved into the tagged replica_state). v17: a tagged replica_directory_id per partition.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import Any
from uuid import UUID

from kafkad.protocol import primitives as p

FIRST_VERSION = 11
LAST_VERSION = 17

_ZERO_UUID = UUID(int=0)
_HEAD = struct.Struct(">iiiibii")  # replica_id .. session_epoch (v11-14)
_HEAD11 = struct.Struct(">iiiibiii")  # ... and the topics count (v11)
_TAIL11 = struct.Struct(">ih")  # forgotten_topics_data count, rack_id length (v11)
_HEAD15 = struct.Struct(">iiibii")  # max_wait_ms .. session_epoch (v15+: no replica_id)
_PART11 = struct.Struct(">iiqqi")
_PART12 = struct.Struct(">iiqiqiB")  # ... and the partition's tag count (0: no tagged field)
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_unpack16 = _I16.unpack_from
_unpack32 = _I32.unpack_from

# Anything a malformed frame makes Python raise here: the generic codec then decodes and refuses it.
_FAILURES = (struct.error, IndexError, ValueError, OverflowError)


def _read_v11(buf: p.Buf, pos: int) -> dict[str, Any] | None:
    size = len(buf)
    replica_id, max_wait, min_bytes, max_bytes, isolation, session_id, epoch, n_topics = _HEAD11.unpack_from(
        buf, pos
    )
    pos += 29
    if n_topics < 0 or n_topics > size - pos:
        return None
    topics = []
    unpack_part = _PART11.unpack_from
    for _ in range(n_topics):
        (n,) = _unpack16(buf, pos)
        pos += 2
        end = pos + n
        if n < 0 or end > size:
            return None
        name = str(buf[pos:end], "utf-8")
        (count,) = _unpack32(buf, end)
        pos = end + 4
        if count < 0 or pos + 28 * count > size:
            return None
        parts = []
        for _ in range(count):
            index, leader_epoch, offset, log_start, max_part = unpack_part(buf, pos)
            pos += 28
            parts.append(
                {
                    "partition": index,
                    "current_leader_epoch": leader_epoch,
                    "fetch_offset": offset,
                    "log_start_offset": log_start,
                    "partition_max_bytes": max_part,
                    "last_fetched_epoch": -1,
                    "replica_directory_id": _ZERO_UUID,
                }
            )
        topics.append({"topic": name, "partitions": parts, "topic_id": _ZERO_UUID})
    forgotten, n = _TAIL11.unpack_from(buf, pos)  # forgotten_topics_data count, rack_id length
    pos += 6
    if forgotten != 0 or n < 0 or pos + n > size:
        return None
    return {
        "replica_id": replica_id,
        "max_wait_ms": max_wait,
        "min_bytes": min_bytes,
        "max_bytes": max_bytes,
        "isolation_level": isolation,
        "session_id": session_id,
        "session_epoch": epoch,
        "topics": topics,
        "forgotten_topics_data": [],
        "rack_id": str(buf[pos : pos + n], "utf-8") if n else "",
        "cluster_id": None,
        "replica_state": {"replica_id": -1, "replica_epoch": -1},
    }


def _read_flexible(buf: p.Buf, pos: int, version: int) -> dict[str, Any] | None:
    """v12-17: compact lengths of at most one varint byte (< 127 topics / partitions, names < 127 bytes;
    longer ones go to the generic codec) and every tag section empty."""
    size = len(buf)
    if version < 15:
        replica_id, max_wait, min_bytes, max_bytes, isolation, session_id, epoch = _HEAD.unpack_from(buf, pos)
        pos += 25
    else:
        max_wait, min_bytes, max_bytes, isolation, session_id, epoch = _HEAD15.unpack_from(buf, pos)
        pos += 21
    n_topics = buf[pos] - 1
    pos += 1
    if n_topics < 0 or n_topics >= 0x7F:
        return None
    by_id = version >= 13
    topics = []
    unpack_part = _PART12.unpack_from
    for _ in range(n_topics):
        if by_id:
            end = pos + 16
            if end > size:
                return None
            tid = UUID(bytes=bytes(buf[pos:end]))
        else:
            n = buf[pos] - 1
            end = pos + 1 + n
            if n < 0 or n >= 0x7F or end > size:
                return None
            name = str(buf[pos + 1 : end], "utf-8")
        count = buf[end] - 1
        pos = end + 1
        if count < 0 or count >= 0x7F:
            return None
        parts = []
        for _ in range(count):
            index, leader_epoch, offset, last_epoch, log_start, max_part, tags = unpack_part(buf, pos)
            if tags:
                return None
            pos += 33
            parts.append(
                {
                    "partition": index,
                    "current_leader_epoch": leader_epoch,
                    "fetch_offset": offset,
                    "last_fetched_epoch": last_epoch,
                    "log_start_offset": log_start,
                    "partition_max_bytes": max_part,
                    "replica_directory_id": _ZERO_UUID,
                }
            )
        if buf[pos]:  # the topic's tag section
            return None
        pos += 1
        if by_id:
            topics.append({"topic_id": tid, "partitions": parts, "topic": ""})
        else:
            topics.append({"topic": name, "partitions": parts, "topic_id": _ZERO_UUID})
    if buf[pos] != 1:  # forgotten_topics_data: only the empty array
        return None
    n = buf[pos + 1] - 1
    pos += 2
    end = pos + n
    if n < 0 or n >= 0x7F or end >= size or buf[end]:  # rack_id, then an empty tag section
        return None
    rack = str(buf[pos:end], "utf-8") if n else ""
    if version < 15:
        return {
            "replica_id": replica_id,
            "max_wait_ms": max_wait,
            "min_bytes": min_bytes,
            "max_bytes": max_bytes,
            "isolation_level": isolation,
            "session_id": session_id,
            "session_epoch": epoch,
            "topics": topics,
            "forgotten_topics_data": [],
            "rack_id": rack,
            "cluster_id": None,
            "replica_state": {"replica_id": -1, "replica_epoch": -1},
        }
    return {
        "max_wait_ms": max_wait,
        "min_bytes": min_bytes,
        "max_bytes": max_bytes,
        "isolation_level": isolation,
        "session_id": session_id,
        "session_epoch": epoch,
        "topics": topics,
        "forgotten_topics_data": [],
        "rack_id": rack,
        "cluster_id": None,
        "replica_id": -1,
        "replica_state": {"replica_id": -1, "replica_epoch": -1},
    }


def read_request(buf: p.Buf, pos: int, version: int) -> dict[str, Any] | None:
    """The body of a Fetch request of `version` at `pos` (after the header and its tag section), as the
    generic codec decodes it, or None: not a shape this reads (the caller decodes generically)."""
    try:
        if version == 11:
            return _read_v11(buf, pos)
        return _read_flexible(buf, pos, version)
    except _FAILURES:
        return None


# --- response ----------------------------------------------------------------------------------------

_RESP_HEAD = struct.Struct(">ihi")  # throttle_time_ms, error_code, session_id
_RPART = struct.Struct(">ihqqq")  # partition_index .. log_start_offset
_PAIR = struct.Struct(">qq")  # an aborted transaction: producer_id, first_offset
_NULL_ARRAY = _I32.pack(-1)
# A key besides those written makes the generic writer write a tag section (a partition's diverging_epoch,
# current_leader, snapshot_id, the body's node_endpoints, unknown tags) or is one it ignores: both go the
# generic way. The body and each partition have exactly the keys read (their count, and no KeyError).
_BODY_KEYS = 4
_PART_KEYS = 8
_TOPIC_KEYS = frozenset(("topic", "topic_id", "partitions"))
_INLINE = (bytes, bytearray)


def _records(out: p.Out, v: Any, flexible: bool) -> None:
    """As primitives.records_writer: bytes inline, None null, a list of chunks (bytes-likes inline,
    anything with `size` an out-of-band ref), one ref."""
    t = type(v)
    if t is list:
        n = 0
        for c in v:
            n += len(c) if isinstance(c, _INLINE) else c.nbytes if type(c) is memoryview else int(c.size)
        if flexible:
            p.write_uvarint(out, n + 1)
        else:
            out += _I32.pack(n)
        for c in v:
            if isinstance(c, (bytes, bytearray, memoryview)):
                out += c
            else:
                out.add_ref(c)
        return
    if v is None:
        out += b"\x00" if flexible else _NULL_ARRAY
        return
    if isinstance(v, (bytes, bytearray, memoryview)):
        n = memoryview(v).nbytes
        if flexible:
            p.write_uvarint(out, n + 1)
        else:
            out += _I32.pack(n)
        out += v
        return
    n = int(v.size)
    if flexible:
        p.write_uvarint(out, n + 1)
    else:
        out += _I32.pack(n)
    out.add_ref(v)


def _write(out: p.Out, body: Mapping[str, Any], version: int) -> bool:
    flexible = version >= 12
    by_id = version >= 13
    if len(body) != _BODY_KEYS:
        return False
    out += _RESP_HEAD.pack(body["throttle_time_ms"], body["error_code"], body["session_id"])
    responses = body["responses"]
    if flexible:
        p.write_uvarint(out, len(responses) + 1)
    else:
        out += _I32.pack(len(responses))
    pack_part = _RPART.pack
    pack32 = _I32.pack
    for t in responses:
        if not _TOPIC_KEYS.issuperset(t):
            return False
        if by_id:
            out += t["topic_id"].bytes
        else:
            name = t["topic"].encode()
            if flexible:
                p.write_uvarint(out, len(name) + 1)
            else:
                out += _I16.pack(len(name))
            out += name
        parts = t["partitions"]
        if flexible:
            p.write_uvarint(out, len(parts) + 1)
        else:
            out += pack32(len(parts))
        for d in parts:
            if len(d) != _PART_KEYS:
                return False
            out += pack_part(
                d["partition_index"],
                d["error_code"],
                d["high_watermark"],
                d["last_stable_offset"],
                d["log_start_offset"],
            )
            aborted = d["aborted_transactions"]
            if aborted is None:
                out += b"\x00" if flexible else _NULL_ARRAY
            elif not _aborted(out, aborted, flexible):
                return False
            out += pack32(d["preferred_read_replica"])
            _records(out, d["records"], flexible)
            if flexible:
                out.append(0)
        if flexible:
            out.append(0)
    if flexible:
        out.append(0)
    return True


def _aborted(out: p.Out, aborted: list[Any], flexible: bool) -> bool:
    if flexible:
        p.write_uvarint(out, len(aborted) + 1)
    else:
        out += _I32.pack(len(aborted))
    for a in aborted:
        if len(a) != 2:  # any other key: the generic writer's business (tags, defaults)
            return False
        out += _PAIR.pack(a["producer_id"], a["first_offset"])
        if flexible:
            out.append(0)
    return True


def write_response(out: p.Out, body: Mapping[str, Any], version: int) -> bool:
    """Write a Fetch response body of `version` into `out` as the generic writer would; False (with
    `out` half-written: the caller starts again) for a body this does not write."""
    try:
        return _write(out, body, version)
    except (KeyError, TypeError, AttributeError, ValueError, OverflowError, struct.error):
        return False
