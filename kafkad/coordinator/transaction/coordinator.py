"""The transaction coordinator's request logic (Kafka's TransactionCoordinator.scala), with its error codes.

Every change of a transactional id's state is a record appended to its `__transaction_state` partition
(`TxnLog.append`, which also waits for the ISR) before the state changes in memory (state.py's two-step
transitions). EndTxn is answered once PrepareCommit/PrepareAbort is in the log; the markers are then written
to every partition of the transaction (`MarkerSender.send`, retried until they land) and CompleteCommit/
CompleteAbort appended, as Kafka does. An ongoing transaction older than its timeout is aborted with its
producer fenced (epoch bump); an idle id older than transactional.id.expiration.ms is removed (tombstone).

Runs on the event loop; the awaits are the log appends and the marker sends.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol

from kafkad.clock import Clock
from kafkad.coordinator.transaction.records import (
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    metadata_of,
)
from kafkad.coordinator.transaction.state import (
    IDLE,
    MAX_EPOCH,
    NO_PRODUCER_EPOCH,
    TopicPartition,
    TxnMetadata,
    TxnState,
    TxnTransit,
)
from kafkad.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

S = TxnState
E = ErrorCode
KeyValue = tuple[bytes, bytes | None]
COMPLETE_RETRY_S = 0.1  # backoff of a CompleteCommit/CompleteAbort append that found the log unavailable


@dataclass(frozen=True, slots=True)
class TxnConfig:
    num_partitions: int = 50
    max_timeout_ms: int = 900_000
    id_expiration_ms: int = 7 * 24 * 3600 * 1000
    abort_interval_ms: int = 10_000
    expire_interval_ms: int = 3_600_000


class TxnMarker(NamedTuple):
    """What txn-log's `write_markers` takes, field for field."""

    producer_id: int
    producer_epoch: int
    committed: bool
    coordinator_epoch: int
    partitions: list[TopicPartition]


class TxnLog(Protocol):
    """`__transaction_state` as the coordinator sees it (log_store.py; a memory fake in unit tests)."""

    def error_for(self, transactional_id: str) -> ErrorCode | None:
        """None if this broker coordinates the id now, else NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS."""

    def coordinator_epoch(self, transactional_id: str) -> int: ...

    async def append(self, transactional_id: str, record: KeyValue) -> ErrorCode:
        """Append and wait until replicated; NONE or the error to answer (Kafka's mapping of append errors)."""


class MarkerSender(Protocol):
    async def send(self, marker: TxnMarker, still_valid: Callable[[], bool]) -> bool:
        """Write the marker to every partition, retrying until each lands; False if `still_valid()` turned
        false (the coordinator moved) first."""


class InitResult(NamedTuple):
    error: ErrorCode
    producer_id: int = -1
    producer_epoch: int = -1


class TxnDescription(NamedTuple):
    transactional_id: str
    state: TxnState
    timeout_ms: int
    start_ms: int
    producer_id: int
    producer_epoch: int
    partitions: frozenset[TopicPartition]


class TransactionCoordinator:
    def __init__(
        self,
        config: TxnConfig,
        clock: Clock,
        txn_log: TxnLog,
        markers: MarkerSender,
        allocate_producer_id: Callable[[], Awaitable[int]],
    ) -> None:
        self.config = config
        self.clock = clock
        self.log = txn_log
        self.markers = markers
        self.allocate_producer_id = allocate_producer_id
        self.txns: dict[str, TxnMetadata] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    # --- loading (a partition of __transaction_state became ours) --------------------------------------------
    def load(self, records: Iterable[KeyValue]) -> list[str]:
        """Replay records (oldest first); returns the ids left in PrepareCommit/PrepareAbort, whose markers
        `resume` sends again (TransactionStateManager.loadTransactionsForTxnTopicPartition)."""
        loaded: dict[str, TxnMetadata | None] = {}
        for key, value in records:
            try:
                txn_id = decode_key(key)
                if txn_id is None:
                    continue
                loaded[txn_id] = None if value is None else metadata_of(txn_id, decode_value(value))
            except KafkaError as e:
                log.warning("__transaction_state: skipping an undecodable record: %s", e)
        pending = []
        for txn_id, meta in loaded.items():
            if meta is None:
                self.txns.pop(txn_id, None)
                continue
            self.txns[txn_id] = meta
            if meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                pending.append(txn_id)
        return pending

    def resume(self, txn_ids: Iterable[str]) -> None:
        for txn_id in txn_ids:
            meta = self.txns.get(txn_id)
            if meta is not None and meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                self._spawn(self._finish(txn_id, meta, self.log.coordinator_epoch(txn_id)))

    def unload(self, txn_ids: Iterable[str]) -> None:
        for txn_id in list(txn_ids):
            self.txns.pop(txn_id, None)

    def stop(self) -> None:
        for task in list(self._tasks):
            task.cancel()

    def _spawn(self, coro: Awaitable[None]) -> None:
        task: asyncio.Task[None] = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _current(self, txn_id: str) -> TxnMetadata | None:
        """The id's metadata if this broker coordinates it (KafkaError otherwise)."""
        err = self.log.error_for(txn_id)
        if err is not None:
            raise KafkaError(err, f"transactional id {txn_id!r} is not coordinated by this broker")
        return self.txns.get(txn_id)

    async def _write(self, txn_id: str, meta: TxnMetadata, transit: TxnTransit) -> ErrorCode:
        """Append `transit` and apply it; on failure the pending state is dropped."""
        epoch = self.log.coordinator_epoch(txn_id)
        err = await self.log.append(txn_id, (encode_key(txn_id), encode_value(transit)))
        if err is E.NONE and (
            self.txns.get(txn_id) is not meta
            or self.log.error_for(txn_id) is not None
            or self.log.coordinator_epoch(txn_id) != epoch
        ):
            err = E.NOT_COORDINATOR  # the partition moved during the append
        if err is E.NONE:
            meta.complete(transit)
        else:
            meta.abort_pending()
        return err

    # --- InitProducerId ----------------------------------------------------------------------------------------
    async def init_producer_id(
        self, txn_id: str, timeout_ms: int, expected: tuple[int, int] | None = None
    ) -> InitResult:
        if not txn_id:
            return InitResult(E.INVALID_REQUEST)
        if timeout_ms <= 0 or timeout_ms > self.config.max_timeout_ms:
            return InitResult(E.INVALID_TRANSACTION_TIMEOUT)
        try:
            meta = self._current(txn_id)
        except KafkaError as e:
            return InitResult(e.code)
        if meta is None:
            pid = await self.allocate_producer_id()
            moved = self.log.error_for(txn_id)  # the partition may have moved during the allocation
            if moved is not None:
                return InitResult(moved)
            meta = self.txns.get(txn_id)  # another request may have created it meanwhile
            if meta is None:
                meta = self.txns[txn_id] = TxnMetadata(txn_id, pid, NO_PRODUCER_EPOCH, timeout_ms)
        if meta.pending_state is not None:
            return InitResult(E.CONCURRENT_TRANSACTIONS)
        if expected is not None and not _valid_producer(meta, *expected):
            return InitResult(E.PRODUCER_FENCED)
        now = self.clock.time_ms()
        if meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            return InitResult(E.CONCURRENT_TRANSACTIONS)
        if meta.state is S.ONGOING:
            # Abort it with the producer fenced; the client retries and then gets the epoch bumped again.
            epoch = meta.prepare_fence_epoch()
            err = await self._end(txn_id, meta, meta.producer_id, epoch, committed=False, from_client=False)
            return InitResult(E.CONCURRENT_TRANSACTIONS if err is E.NONE else err)
        if meta.state not in IDLE:  # Dead, PrepareEpochFence: never at rest
            return InitResult(E.UNKNOWN_SERVER_ERROR)
        if meta.epoch_exhausted and (expected is None or expected[1] == meta.producer_epoch):
            new_pid = await self.allocate_producer_id()
            if meta.pending_state is not None or self.txns.get(txn_id) is not meta:
                return InitResult(E.CONCURRENT_TRANSACTIONS)
            transit: TxnTransit | None = meta.prepare_producer_id_rotation(
                new_pid, timeout_ms, now, record_last_epoch=expected is not None
            )
        else:
            transit = meta.prepare_increment_epoch(timeout_ms, None if expected is None else expected[1], now)
        if transit is None:
            return InitResult(E.PRODUCER_FENCED)
        err = await self._write(txn_id, meta, transit)
        if err is not E.NONE:
            return InitResult(err)
        return InitResult(E.NONE, meta.producer_id, meta.producer_epoch)

    # --- AddPartitionsToTxn / AddOffsetsToTxn ---------------------------------------------------------------
    async def add_partitions(
        self, txn_id: str, producer_id: int, producer_epoch: int, partitions: Iterable[TopicPartition]
    ) -> ErrorCode:
        if not txn_id:
            return E.INVALID_REQUEST
        added = frozenset(partitions)
        try:
            meta = self._current(txn_id)
        except KafkaError as e:
            return e.code
        if meta is None or meta.producer_id != producer_id:
            return E.INVALID_PRODUCER_ID_MAPPING
        if meta.producer_epoch != producer_epoch:
            return E.PRODUCER_FENCED
        if meta.pending_state is not None or meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            return E.CONCURRENT_TRANSACTIONS
        if meta.state is S.ONGOING and added <= meta.partitions:
            return E.NONE
        if meta.state not in IDLE and meta.state is not S.ONGOING:
            return E.INVALID_TXN_STATE
        return await self._write(txn_id, meta, meta.prepare_add_partitions(added, self.clock.time_ms()))

    def verify_partitions(
        self, txn_id: str, producer_id: int, producer_epoch: int, partitions: Iterable[TopicPartition]
    ) -> ErrorCode | dict[TopicPartition, ErrorCode]:
        """AddPartitionsToTxn verify_only (KIP-890): one error for all, or NONE/TRANSACTION_ABORTABLE each."""
        if not txn_id:
            return E.INVALID_REQUEST
        try:
            meta = self._current(txn_id)
        except KafkaError as e:
            return e.code
        if meta is None or meta.producer_id != producer_id:
            return E.INVALID_PRODUCER_ID_MAPPING
        if meta.producer_epoch != producer_epoch:
            return E.PRODUCER_FENCED
        if meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            return E.CONCURRENT_TRANSACTIONS
        return {tp: E.NONE if tp in meta.partitions else E.TRANSACTION_ABORTABLE for tp in partitions}

    # --- EndTxn ------------------------------------------------------------------------------------------------
    async def end_txn(self, txn_id: str, producer_id: int, producer_epoch: int, committed: bool) -> ErrorCode:
        if not txn_id:
            return E.INVALID_REQUEST
        try:
            meta = self._current(txn_id)
        except KafkaError as e:
            return e.code
        if meta is None:
            return E.INVALID_PRODUCER_ID_MAPPING
        return await self._end(txn_id, meta, producer_id, producer_epoch, committed, from_client=True)

    async def _end(
        self,
        txn_id: str,
        meta: TxnMetadata,
        producer_id: int,
        producer_epoch: int,
        committed: bool,
        *,
        from_client: bool,
    ) -> ErrorCode:
        fencing = meta.pending_state is S.PREPARE_EPOCH_FENCE
        err: ErrorCode | None
        if meta.producer_id != producer_id:
            err = E.INVALID_PRODUCER_ID_MAPPING
        elif (from_client and producer_epoch != meta.producer_epoch) or producer_epoch < meta.producer_epoch:
            err = E.PRODUCER_FENCED
        elif meta.pending_state is not None and not fencing:
            err = E.CONCURRENT_TRANSACTIONS
        else:
            err = _end_state_error(meta.state, committed)
        if err is not None:
            if fencing:
                meta.abort_pending()
            return err
        if fencing:  # PrepareAbort carries the bumped epoch (never the PrepareEpochFence itself)
            meta.abort_pending()
            meta.producer_epoch = producer_epoch
            meta.last_producer_epoch = NO_PRODUCER_EPOCH
        state = S.PREPARE_COMMIT if committed else S.PREPARE_ABORT
        coordinator_epoch = self.log.coordinator_epoch(txn_id)
        err = await self._write(txn_id, meta, meta.prepare_abort_or_commit(state, self.clock.time_ms()))
        if fencing and err is not E.NONE:
            meta.failed_fence = True  # the old producer stays fenced; a retry does not bump again
        if err is E.NONE:
            self._spawn(self._finish(txn_id, meta, coordinator_epoch))
        return err

    async def _finish(self, txn_id: str, meta: TxnMetadata, coordinator_epoch: int) -> None:
        """Send the markers of a PrepareCommit/PrepareAbort, then append CompleteCommit/CompleteAbort."""

        def valid() -> bool:
            return (
                self.txns.get(txn_id) is meta
                and self.log.error_for(txn_id) is None
                and self.log.coordinator_epoch(txn_id) == coordinator_epoch
            )

        committed = meta.state is S.PREPARE_COMMIT
        marker = TxnMarker(
            meta.producer_id, meta.producer_epoch, committed, coordinator_epoch, sorted(meta.partitions)
        )
        try:
            if not await self.markers.send(marker, valid):
                log.info("%s: markers not completed here: the coordinator moved", txn_id)
                return
            while valid() and meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                if meta.pending_state is None:
                    err = await self._write(txn_id, meta, meta.prepare_complete(self.clock.time_ms()))
                    if err is E.NONE:
                        return
                    if err is E.NOT_COORDINATOR:
                        return  # the new coordinator completes it
                    log.warning("%s: appending the completion failed (%s); retrying", txn_id, err.name)
                await asyncio.sleep(COMPLETE_RETRY_S)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("%s: completing the transaction failed", txn_id)

    # --- timeouts and expiration ----------------------------------------------------------------------------------
    async def abort_timed_out(self) -> int:
        """Abort every ongoing transaction past its timeout, fencing its producer; how many were started."""
        now = self.clock.time_ms()
        due = [
            (txn_id, meta)
            for txn_id, meta in self.txns.items()
            if meta.state is S.ONGOING
            and meta.pending_state is None
            and meta.txn_start_ms + meta.txn_timeout_ms < now
            and self.log.error_for(txn_id) is None
        ]
        started = 0
        for txn_id, meta in due:
            if meta.pending_state is not None or meta.state is not S.ONGOING:
                continue  # changed while an earlier abort awaited
            log.info("%s: aborting its transaction: older than %d ms", txn_id, meta.txn_timeout_ms)
            epoch = meta.prepare_fence_epoch()
            err = await self._end(txn_id, meta, meta.producer_id, epoch, committed=False, from_client=False)
            if err is E.NONE:
                started += 1
            else:
                log.warning("%s: aborting the timed-out transaction failed: %s", txn_id, err.name)
        return started

    async def expire_ids(self) -> int:
        """Remove ids idle longer than transactional.id.expiration.ms (a tombstone each); how many."""
        now = self.clock.time_ms()
        due = [
            (txn_id, meta)
            for txn_id, meta in self.txns.items()
            if meta.state in IDLE
            and meta.pending_state is None
            and meta.txn_last_update_ms + self.config.id_expiration_ms <= now
            and self.log.error_for(txn_id) is None
        ]
        removed = 0
        for txn_id, meta in due:
            if meta.pending_state is not None or meta.state not in IDLE:
                continue
            meta.prepare_dead(now)
            err = await self.log.append(txn_id, (encode_key(txn_id), None))
            meta.abort_pending()
            if err is E.NONE and self.txns.get(txn_id) is meta:
                meta.state = S.DEAD
                del self.txns[txn_id]
                removed += 1
        return removed

    # --- DescribeTransactions / ListTransactions ----------------------------------------------------------------
    def describe(self, txn_id: str) -> TxnDescription | ErrorCode:
        try:
            meta = self._current(txn_id)
        except KafkaError as e:
            return e.code
        if meta is None or meta.state is S.DEAD:
            return E.TRANSACTIONAL_ID_NOT_FOUND
        return TxnDescription(
            txn_id,
            meta.state,
            meta.txn_timeout_ms,
            meta.txn_start_ms,
            meta.producer_id,
            meta.producer_epoch,
            frozenset(meta.partitions),
        )

    def list_transactions(
        self, states: Sequence[TxnState], producer_ids: Sequence[int], min_duration_ms: int = -1
    ) -> list[tuple[str, int, TxnState]]:
        now = self.clock.time_ms()
        out: list[tuple[str, int, TxnState]] = []
        for txn_id, meta in self.txns.items():
            if self.log.error_for(txn_id) is not None or meta.state is S.DEAD:
                continue
            if states and meta.state not in states:
                continue
            if producer_ids and meta.producer_id not in producer_ids:
                continue
            if min_duration_ms >= 0 and (meta.state in IDLE or now - meta.txn_start_ms < min_duration_ms):
                continue  # KIP-994: only transactions running at least that long
            out.append((txn_id, meta.producer_id, meta.state))
        return out


def _valid_producer(meta: TxnMetadata, producer_id: int, epoch: int) -> bool:
    """KIP-360's check of InitProducerId's expected producer id (isValidProducerId): a just-created id, the
    current producer id (its epoch is checked by the bump), or the previous one with an exhausted epoch (a
    retry of a rotation whose answer was lost)."""
    return (
        meta.producer_epoch == NO_PRODUCER_EPOCH
        or producer_id == meta.producer_id
        or (producer_id == meta.last_producer_id and epoch >= MAX_EPOCH - 1)
    )


def _end_state_error(state: TxnState, committed: bool) -> ErrorCode | None:
    """EndTxn by state: None = go ahead (Ongoing), else the answer (TransactionCoordinator.endTransaction)."""
    if state is S.ONGOING:
        return None
    if state is (S.COMPLETE_COMMIT if committed else S.COMPLETE_ABORT):
        return E.NONE  # a retry of an EndTxn that completed
    if state is (S.PREPARE_COMMIT if committed else S.PREPARE_ABORT):
        return E.CONCURRENT_TRANSACTIONS
    return E.INVALID_TXN_STATE
