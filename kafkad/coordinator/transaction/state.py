"""A transactional id's metadata and its state machine (Kafka's TransactionMetadata.scala).

States and their wire ids are Kafka's (the id is what `__transaction_state` stores). A change goes in two
steps, as in Kafka: `prepare_*` checks the transition, sets `pending_state` and returns a `TxnTransit` (the
record to append); once the record is in the log `complete(transit)` applies it, or `abort_pending()` drops
it when the append failed. While a transition is pending, client requests answer CONCURRENT_TRANSACTIONS:
that is what serializes requests across the awaits of an append (the coordinator runs on one event loop).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from kafkad.protocol.transaction_log import TxnState

__all__ = [
    "IDLE",
    "MAX_EPOCH",
    "IllegalTransition",
    "TopicPartition",
    "TxnMetadata",
    "TxnState",
    "TxnTransit",
]

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_EPOCH = 32767  # Short.MaxValue

TopicPartition = tuple[str, int]


S = TxnState
# TransactionState.validPreviousStates
VALID_PREVIOUS: dict[TxnState, frozenset[TxnState]] = {
    S.EMPTY: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.ONGOING: frozenset({S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_COMMIT: frozenset({S.ONGOING}),
    S.PREPARE_ABORT: frozenset({S.ONGOING, S.PREPARE_EPOCH_FENCE}),
    S.COMPLETE_COMMIT: frozenset({S.PREPARE_COMMIT}),
    S.COMPLETE_ABORT: frozenset({S.PREPARE_ABORT}),
    S.DEAD: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_EPOCH_FENCE: frozenset({S.ONGOING}),
}
# States whose transaction is finished: the id may expire, a new transaction may start.
IDLE = frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT})


class IllegalTransition(RuntimeError):
    """A transition the state machine forbids: a coordinator bug, never a client's doing."""


@dataclass(frozen=True, slots=True)
class TxnTransit:
    """What one `__transaction_state` record says: the metadata after the pending transition."""

    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    state: TxnState
    partitions: frozenset[TopicPartition]
    txn_start_ms: int
    txn_last_update_ms: int


@dataclass(slots=True)
class TxnMetadata:
    """One transactional id's state on its coordinator. Mutated only on the event loop."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    txn_timeout_ms: int
    state: TxnState = S.EMPTY
    last_producer_id: int = NO_PRODUCER_ID
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    partitions: set[TopicPartition] = field(default_factory=set)
    txn_start_ms: int = -1
    txn_last_update_ms: int = -1
    pending_state: TxnState | None = None
    failed_fence: bool = False  # a fence's PrepareAbort append failed: the epoch is bumped already

    @property
    def epoch_exhausted(self) -> bool:
        return self.producer_epoch >= MAX_EPOCH - 1

    def _transit(
        self,
        state: TxnState,
        *,
        producer_id: int | None = None,
        epoch: int | None = None,
        last_epoch: int | None = None,
        timeout_ms: int | None = None,
        partitions: frozenset[TopicPartition] | None = None,
        start_ms: int | None = None,
        now_ms: int,
    ) -> TxnTransit:
        if self.pending_state is not None:
            raise IllegalTransition(f"{self.transactional_id}: {self.pending_state.kafka_name} is pending")
        if self.state not in VALID_PREVIOUS[state]:
            raise IllegalTransition(f"{self.transactional_id}: {self.state.kafka_name} -> {state.kafka_name}")
        self.pending_state = state
        return TxnTransit(
            producer_id=self.producer_id if producer_id is None else producer_id,
            last_producer_id=self.last_producer_id,
            producer_epoch=self.producer_epoch if epoch is None else epoch,
            last_producer_epoch=self.last_producer_epoch if last_epoch is None else last_epoch,
            txn_timeout_ms=self.txn_timeout_ms if timeout_ms is None else timeout_ms,
            state=state,
            partitions=frozenset(self.partitions) if partitions is None else partitions,
            txn_start_ms=self.txn_start_ms if start_ms is None else start_ms,
            txn_last_update_ms=now_ms,
        )

    # --- the transitions (TransactionMetadata.prepare*) ---------------------------------------------------
    def prepare_increment_epoch(
        self, timeout_ms: int, expected_epoch: int | None, now_ms: int
    ) -> TxnTransit | None:
        """InitProducerId on an idle id: bump the epoch (KIP-360 rules); None = the caller is fenced."""
        bumped = self.producer_epoch + 1
        if expected_epoch is None:  # a fresh InitProducerId
            epoch, last = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == self.producer_epoch:
            epoch, last = bumped, self.producer_epoch  # the producer recovers from an abortable error
        elif expected_epoch == self.last_producer_epoch:
            epoch, last = self.producer_epoch, self.last_producer_epoch  # a retry of a call that succeeded
        else:
            return None
        return self._transit(
            S.EMPTY,
            epoch=epoch,
            last_epoch=last,
            timeout_ms=timeout_ms,
            partitions=frozenset(),
            now_ms=now_ms,
        )

    def prepare_producer_id_rotation(
        self, new_producer_id: int, timeout_ms: int, now_ms: int, record_last_epoch: bool
    ) -> TxnTransit:
        """The epoch is exhausted: a new producer id at epoch 0."""
        transit = self._transit(
            S.EMPTY,
            producer_id=new_producer_id,
            epoch=0,
            last_epoch=self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH,
            timeout_ms=timeout_ms,
            partitions=frozenset(),
            now_ms=now_ms,
        )
        return replace(transit, last_producer_id=self.producer_id if record_last_epoch else NO_PRODUCER_ID)

    def prepare_fence_epoch(self) -> int:
        """Fence the producer of an ongoing transaction before aborting it (InitProducerId, timeout): the
        epoch to abort with; the PrepareAbort record carries it (PrepareEpochFence is never written). After
        a failed fence the epoch in memory is already bumped: it is not bumped twice."""
        if self.producer_epoch >= MAX_EPOCH:
            raise IllegalTransition(f"{self.transactional_id}: epoch {self.producer_epoch} cannot be bumped")
        if self.pending_state is not None or self.state is not S.ONGOING:
            raise IllegalTransition(f"{self.transactional_id}: cannot fence in {self.state.kafka_name}")
        self.pending_state = S.PREPARE_EPOCH_FENCE
        return self.producer_epoch if self.failed_fence else self.producer_epoch + 1

    def prepare_add_partitions(self, added: frozenset[TopicPartition], now_ms: int) -> TxnTransit:
        start = now_ms if self.state in IDLE else self.txn_start_ms
        return self._transit(
            S.ONGOING, partitions=frozenset(self.partitions) | added, start_ms=start, now_ms=now_ms
        )

    def prepare_abort_or_commit(self, state: TxnState, now_ms: int) -> TxnTransit:
        return self._transit(state, now_ms=now_ms)

    def prepare_complete(self, now_ms: int) -> TxnTransit:
        state = S.COMPLETE_COMMIT if self.state is S.PREPARE_COMMIT else S.COMPLETE_ABORT
        return self._transit(state, partitions=frozenset(), now_ms=now_ms)

    def prepare_dead(self, now_ms: int) -> TxnTransit:
        return self._transit(S.DEAD, partitions=frozenset(), now_ms=now_ms)

    # --- applying --------------------------------------------------------------------------------------------
    def complete(self, transit: TxnTransit) -> None:
        """The transit's record is in the log: make it the state (TransactionMetadata.completeTransitionTo)."""
        if self.pending_state is not transit.state:
            raise IllegalTransition(
                f"{self.transactional_id}: completing {transit.state.kafka_name}, pending "
                f"{self.pending_state.kafka_name if self.pending_state else None}"
            )
        self.pending_state = None
        self.failed_fence = False
        self.apply(transit)

    def apply(self, transit: TxnTransit) -> None:
        self.producer_id = transit.producer_id
        self.last_producer_id = transit.last_producer_id
        self.producer_epoch = transit.producer_epoch
        self.last_producer_epoch = transit.last_producer_epoch
        self.txn_timeout_ms = transit.txn_timeout_ms
        self.state = transit.state
        self.partitions = set(transit.partitions)
        self.txn_start_ms = transit.txn_start_ms
        self.txn_last_update_ms = transit.txn_last_update_ms

    def abort_pending(self) -> None:
        self.pending_state = None
