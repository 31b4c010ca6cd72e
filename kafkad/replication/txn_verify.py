"""KIP-890 server side: the check a partition leader makes before it accepts a transactional batch.

A transactional Produce batch from a producer that has no ongoing transaction on the partition opens one.
Before the leader lets it (Kafka 3.9's `AddPartitionsToTxnManager` verification), it asks the transaction
coordinator whether the coordinator added this partition to the producer's transaction: a late write of a
finished transaction (the "hanging transaction") is refused instead of pinning the last stable offset.

The coordinator side (coordinator/transaction/service.py) sets an object satisfying `TxnVerifier` as
`broker.txn_verifier`; when None (no coordinator wired in), the Produce handler accepts.
"""

from __future__ import annotations

from typing import Protocol

from kafkad.protocol.errors import ErrorCode


class TxnVerifier(Protocol):
    async def verify(
        self, transactional_id: str, producer_id: int, producer_epoch: int, topic: str, partition: int
    ) -> ErrorCode:
        """NONE when the coordinator has (topic, partition) in the ongoing transaction of
        (transactional_id, producer_id, producer_epoch); otherwise the error the Produce answers with
        (Kafka: INVALID_PRODUCER_EPOCH for a fenced epoch, INVALID_TXN_STATE when the partition was not
        added or the transaction is not ongoing, NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE /
        CONCURRENT_TRANSACTIONS which the client retries)."""
        ...
