"""Where a transactional id's records go in `__transaction_state`, and the coordinator's values to and from
the topic's record format (kafkad/protocol/transaction_log.py).

A transactional id lives in partition `Utils.abs(transactionalId.hashCode) % transaction.state.log.num.partitions`.
"""

from __future__ import annotations

import struct

from kafkad.coordinator.transaction.state import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TxnMetadata,
    TxnState,
    TxnTransit,
)
from kafkad.protocol import transaction_log as fmt
from kafkad.protocol.transaction_log import TxnValue, decode_key, decode_value, encode_key, format_record

__all__ = [
    "TXN_TOPIC",
    "decode_key",
    "decode_value",
    "encode_key",
    "encode_value",
    "format_record",
    "metadata_of",
    "partition_for",
]

TXN_TOPIC = "__transaction_state"


def _java_string_hash(s: str) -> int:
    h = 0
    for unit in struct.unpack(f">{len(s.encode('utf-16-be')) // 2}H", s.encode("utf-16-be")):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(transactional_id: str, num_partitions: int) -> int:
    """Kafka's `Utils.abs(transactionalId.hashCode) % transactionTopicPartitionCount`."""
    h = _java_string_hash(transactional_id)
    return (0 if h == -(1 << 31) else abs(h)) % num_partitions


def encode_value(t: TxnTransit) -> bytes:
    return fmt.encode_value(
        TxnValue(
            t.producer_id,
            t.producer_epoch,
            t.txn_timeout_ms,
            t.state,
            t.partitions,
            t.txn_last_update_ms,
            t.txn_start_ms,
        )
    )


def metadata_of(transactional_id: str, v: TxnValue) -> TxnMetadata:
    """As TransactionLog.readTxnRecordValue: the last producer id/epoch are not stored."""
    return TxnMetadata(
        transactional_id,
        v.producer_id,
        v.producer_epoch,
        v.txn_timeout_ms,
        v.state,
        NO_PRODUCER_ID,
        NO_PRODUCER_EPOCH,
        set() if v.state is TxnState.EMPTY else set(v.partitions),
        v.txn_start_ms,
        v.txn_last_update_ms,
    )
