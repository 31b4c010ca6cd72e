"""Key/value codecs of the __consumer_offsets topic, byte-compatible with Kafka's.

Every record key starts with an int16 version that says what it is (Kafka's
`GroupCoordinatorRecordSerde`): versions 0 and 1 are an OffsetCommitKey (group, topic,
partition), version 2 is a GroupMetadataKey (group). kafkad writes OffsetCommitKey v1 /
OffsetCommitValue v3 and GroupMetadataKey v2 / GroupMetadataValue v3; it reads values v0..v3.
A null value (tombstone) deletes the key. Strings are int16-length UTF-8 (-1 = null), bytes are
int32-length. All integers big-endian.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from kafkad.protocol.errors import ErrorCode, KafkaError

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
GROUP_METADATA_VALUE_VERSION = 3

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


@dataclass(frozen=True, slots=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupKey:
    group: str


@dataclass(frozen=True, slots=True)
class OffsetValue:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int


@dataclass(frozen=True, slots=True)
class MemberValue:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: tuple[MemberValue, ...]


class _Writer:
    __slots__ = ("parts",)

    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def i16(self, v: int) -> None:
        self.parts.append(_I16.pack(v))

    def i32(self, v: int) -> None:
        self.parts.append(_I32.pack(v))

    def i64(self, v: int) -> None:
        self.parts.append(_I64.pack(v))

    def string(self, v: str | None) -> None:
        if v is None:
            self.i16(-1)
            return
        b = v.encode()
        self.i16(len(b))
        self.parts.append(b)

    def bytes_(self, v: bytes) -> None:
        self.i32(len(v))
        self.parts.append(v)

    def done(self) -> bytes:
        return b"".join(self.parts)


class _Reader:
    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes) -> None:
        self.buf = buf
        self.pos = 0

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.buf):
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "truncated __consumer_offsets record")
        b = self.buf[self.pos : self.pos + n]
        self.pos += n
        return b

    def i16(self) -> int:
        v: int = _I16.unpack(self._take(2))[0]
        return v

    def i32(self) -> int:
        v: int = _I32.unpack(self._take(4))[0]
        return v

    def i64(self) -> int:
        v: int = _I64.unpack(self._take(8))[0]
        return v

    def nullable_string(self) -> str | None:
        n = self.i16()
        return None if n < 0 else self._take(n).decode()

    def string(self) -> str:
        return self.nullable_string() or ""

    def bytes_(self) -> bytes:
        n = self.i32()
        return b"" if n < 0 else self._take(n)


def encode_offset_key(key: OffsetKey) -> bytes:
    return offset_key_bytes(key.group, key.topic, key.partition)


def offset_key_bytes(group: str, topic: str, partition: int) -> bytes:
    """encode_offset_key without the OffsetKey (the commit path's form)."""
    g = group.encode()
    t = topic.encode()
    return b"".join(
        (
            _I16.pack(OFFSET_COMMIT_KEY_VERSION),
            _I16.pack(len(g)),
            g,
            _I16.pack(len(t)),
            t,
            _I32.pack(partition),
        )
    )


def encode_group_key(key: GroupKey) -> bytes:
    w = _Writer()
    w.i16(GROUP_METADATA_KEY_VERSION)
    w.string(key.group)
    return w.done()


def decode_key(data: bytes) -> OffsetKey | GroupKey:
    r = _Reader(data)
    version = r.i16()
    if version in (0, 1):
        return OffsetKey(r.string(), r.string(), r.i32())
    if version == 2:
        return GroupKey(r.string())
    raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"unknown __consumer_offsets key version {version}")


_VALUE_HEAD = struct.Struct(">hqih")  # version, offset, leader epoch, metadata length
_VALUE_NO_METADATA = struct.Struct(">hqihq")  # ... metadata length 0, commit timestamp


def encode_offset_value(v: OffsetValue) -> bytes:
    if not v.metadata:  # what consumers send: one pack
        return _VALUE_NO_METADATA.pack(
            OFFSET_COMMIT_VALUE_VERSION, v.offset, v.leader_epoch, 0, v.commit_timestamp
        )
    m = v.metadata.encode()
    return b"".join(
        (
            _VALUE_HEAD.pack(OFFSET_COMMIT_VALUE_VERSION, v.offset, v.leader_epoch, len(m)),
            m,
            _I64.pack(v.commit_timestamp),
        )
    )


def decode_offset_value(data: bytes) -> OffsetValue:
    r = _Reader(data)
    version = r.i16()
    if not 0 <= version <= 3:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"unsupported OffsetCommitValue v{version}")
    offset = r.i64()
    epoch = r.i32() if version >= 3 else -1
    metadata = r.string()
    commit_ts = r.i64()
    if version == 1:
        r.i64()  # expireTimestamp: per-commit retention is gone since KIP-211
    return OffsetValue(offset, epoch, metadata, commit_ts)


def encode_group_value(v: GroupValue) -> bytes:
    w = _Writer()
    w.i16(GROUP_METADATA_VALUE_VERSION)
    w.string(v.protocol_type)
    w.i32(v.generation)
    w.string(v.protocol)
    w.string(v.leader)
    w.i64(v.current_state_timestamp)
    w.i32(len(v.members))
    for m in v.members:
        w.string(m.member_id)
        w.string(m.group_instance_id)
        w.string(m.client_id)
        w.string(m.client_host)
        w.i32(m.rebalance_timeout)
        w.i32(m.session_timeout)
        w.bytes_(m.subscription)
        w.bytes_(m.assignment)
    return w.done()


def decode_group_value(data: bytes) -> GroupValue:
    r = _Reader(data)
    version = r.i16()
    if not 0 <= version <= 3:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"unsupported GroupMetadataValue v{version}")
    protocol_type = r.string()
    generation = r.i32()
    protocol = r.nullable_string()
    leader = r.nullable_string()
    state_ts = r.i64() if version >= 2 else -1
    members = []
    for _ in range(r.i32()):
        member_id = r.string()
        instance = r.nullable_string() if version >= 3 else None
        client_id = r.string()
        client_host = r.string()
        rebalance = r.i32() if version >= 1 else -1
        session = r.i32()
        if rebalance < 0:
            rebalance = session
        subscription = r.bytes_()
        assignment = r.bytes_()
        members.append(
            MemberValue(
                member_id,
                instance,
                client_id,
                client_host,
                rebalance,
                session,
                subscription,
                assignment,
            )
        )
    return GroupValue(protocol_type, generation, protocol, leader, state_ts, tuple(members))


def java_string_hash(s: str) -> int:
    """Java's String.hashCode over UTF-16 code units, as a signed 32-bit int."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(group_id: str, num_partitions: int) -> int:
    """Kafka's `Utils.abs(groupId.hashCode) % groupMetadataTopicPartitionCount`.

    Utils.abs maps Integer.MIN_VALUE to 0, where Math.abs would stay negative.
    """
    h = java_string_hash(group_id)
    return (0 if h == -(1 << 31) else abs(h)) % num_partitions
