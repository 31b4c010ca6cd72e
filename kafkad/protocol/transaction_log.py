"""Key/value formats of the `__transaction_state` topic, byte-compatible with Kafka's TransactionLog.scala
(TransactionLogKey / TransactionLogValue); sans-IO, shared by the coordinator and kafkad-dump-log.

Key: int16 version 0, then TransactionalId (int16-length UTF-8). Value: int16 version 0 (kafkad writes 0,
as Kafka 3.9 does until transaction.version 1; it reads 0 and the flexible 1), then ProducerId int64,
ProducerEpoch int16, TransactionTimeoutMs int32, TransactionStatus int8, TransactionPartitions (nullable
array of Topic + []int32; null in state Empty), TransactionLastUpdateTimestampMs int64,
TransactionStartTimestampMs int64. A null value (tombstone) removes the id.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum

from kafkad.protocol import primitives as p
from kafkad.protocol.errors import ErrorCode, KafkaError

KEY_VERSION = 0
VALUE_VERSION = 0

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_VALUE_HEAD = struct.Struct(">hqhib")  # version, producer id, epoch, timeout, status
_TIMESTAMPS = struct.Struct(">qq")


class TxnState(IntEnum):
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        """The name Kafka prints and DescribeTransactions/ListTransactions carry ("PrepareCommit")."""
        return _NAMES[self]

    @classmethod
    def from_kafka_name(cls, name: str) -> TxnState | None:
        return _BY_NAME.get(name)


_NAMES = {
    TxnState.EMPTY: "Empty",
    TxnState.ONGOING: "Ongoing",
    TxnState.PREPARE_COMMIT: "PrepareCommit",
    TxnState.PREPARE_ABORT: "PrepareAbort",
    TxnState.COMPLETE_COMMIT: "CompleteCommit",
    TxnState.COMPLETE_ABORT: "CompleteAbort",
    TxnState.DEAD: "Dead",
    TxnState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
_BY_NAME = {v: k for k, v in _NAMES.items()}


@dataclass(frozen=True, slots=True)
class TxnValue:
    producer_id: int
    producer_epoch: int
    txn_timeout_ms: int
    state: TxnState
    partitions: frozenset[tuple[str, int]]
    txn_last_update_ms: int
    txn_start_ms: int


def _string(s: str) -> bytes:
    raw = s.encode()
    return _I16.pack(len(raw)) + raw


def encode_key(transactional_id: str) -> bytes:
    return _I16.pack(KEY_VERSION) + _string(transactional_id)


def encode_value(t: TxnValue) -> bytes:
    out = bytearray(
        _VALUE_HEAD.pack(VALUE_VERSION, t.producer_id, t.producer_epoch, t.txn_timeout_ms, int(t.state))
    )
    if t.state is TxnState.EMPTY:
        out += _I32.pack(-1)
    else:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(t.partitions):
            by_topic.setdefault(topic, []).append(partition)
        out += _I32.pack(len(by_topic))
        for topic, parts in by_topic.items():
            out += _string(topic)
            out += _I32.pack(len(parts))
            for part in parts:
                out += _I32.pack(part)
    out += _TIMESTAMPS.pack(t.txn_last_update_ms, t.txn_start_ms)
    return bytes(out)


def decode_key(buf: bytes) -> str | None:
    """The transactional id, or None for a key version kafkad does not know (Kafka's UnknownKey)."""
    try:
        (version,) = _I16.unpack_from(buf, 0)
        if version != KEY_VERSION:
            return None
        (n,) = _I16.unpack_from(buf, 2)
        if n < 0 or 4 + n > len(buf):
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "transaction log key is truncated")
        return bytes(buf[4 : 4 + n]).decode()
    except struct.error as e:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"transaction log key: {e}") from e


def key_version(buf: bytes) -> int:
    return int(_I16.unpack_from(buf, 0)[0])


def decode_value(value: bytes) -> TxnValue:
    buf = memoryview(value)
    try:
        (version,) = _I16.unpack_from(buf, 0)
        if version not in (0, 1):
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"unknown transaction log value version {version}")
        flexible = version >= 1
        _, pid, epoch, timeout, status = _VALUE_HEAD.unpack_from(buf, 0)
        pos = _VALUE_HEAD.size
        partitions: set[tuple[str, int]] = set()
        if flexible:
            count, pos = p.read_uvarint(buf, pos)
            count -= 1
        else:
            (count,) = _I32.unpack_from(buf, pos)
            pos += 4
        for _ in range(max(count, 0)):
            topic, pos = _read_string(buf, pos, flexible)
            if flexible:
                n, pos = p.read_uvarint(buf, pos)
                n -= 1
            else:
                (n,) = _I32.unpack_from(buf, pos)
                pos += 4
            for _ in range(max(n, 0)):
                partitions.add((topic, _I32.unpack_from(buf, pos)[0]))
                pos += 4
            if flexible:
                pos = _skip_tags(buf, pos)
        last_update, start = _TIMESTAMPS.unpack_from(buf, pos)
        return TxnValue(pid, epoch, timeout, TxnState(status), frozenset(partitions), last_update, start)
    except (struct.error, ValueError, UnicodeDecodeError) as e:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"transaction log value: {e}") from e


def _read_string(buf: memoryview, pos: int, flexible: bool) -> tuple[str, int]:
    if flexible:
        n, pos = p.read_uvarint(buf, pos)
        n -= 1
    else:
        (n,) = _I16.unpack_from(buf, pos)
        pos += 2
    if n < 0 or pos + n > len(buf):
        raise ValueError("string out of bounds")
    return bytes(buf[pos : pos + n]).decode(), pos + n


def _skip_tags(buf: memoryview, pos: int) -> int:
    count, pos = p.read_uvarint(buf, pos)
    for _ in range(count):
        _tag, pos = p.read_uvarint(buf, pos)
        size, pos = p.read_uvarint(buf, pos)
        pos += size
    return pos


def format_record(key: bytes | None, value: bytes | None) -> tuple[str | None, str | None]:
    """Kafka's TransactionLog.formatRecordKeyAndValue (what `kafka-dump-log --transaction-log-decoder`
    prints as `key:` and `payload:`)."""
    if key is None:
        return None, None
    txn_id = decode_key(key)
    if txn_id is None:
        return f"unknown::version={key_version(key)}", None
    if value is None:
        return f"transaction_metadata::transactionalId={txn_id}", "<DELETE>"
    v = decode_value(value)
    parts = v.partitions if v.state is not TxnState.EMPTY else frozenset()
    listed = ",".join(f"{t}-{i}" for t, i in sorted(parts))
    return (
        f"transaction_metadata::transactionalId={txn_id}",
        f"producerId:{v.producer_id},producerEpoch:{v.producer_epoch},state={v.state.kafka_name},"
        f"partitions=[{listed}],txnLastUpdateTimestamp={v.txn_last_update_ms},txnTimeoutMs={v.txn_timeout_ms}",
    )
