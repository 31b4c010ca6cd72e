"""`__transaction_state` as the coordinator's log: ownership, loading, appends (TransactionStateManager).

A broker coordinates the transactional ids of the `__transaction_state` partitions it leads and has loaded.
Standalone, that is every partition once the topic exists: `start()` replays the topic (in the executor) at
startup and `ensure_topic()` creates it on first use, one partition per loop turn, as the group coordinator
does with `__consumer_offsets`. In a cluster it follows leadership (`on_leader` / `on_follower`, as
groups/ownership.py): a new leader replays its partition and resumes the markers of transactions left in
PrepareCommit/PrepareAbort; a former leader forgets the partition's ids. The coordinator epoch of an id is
the leader epoch of its partition (Kafka's), so a stale coordinator's markers are fenced.

An append is one uncompressed batch of one record with acks=-1 (Kafka's TransactionLog.EnforcedRequiredAcks)
and is answered once the ISR has it; errors map as appendTransactionToLog maps them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from kafkad.coordinator.transaction.coordinator import KeyValue, TransactionCoordinator
from kafkad.coordinator.transaction.records import TXN_TOPIC, partition_for
from kafkad.protocol.errors import ErrorCode, KafkaError
from kafkad.storage.records import decode_batch, iter_headers
from kafkad.storage.records.builder import SimpleRecord, build_batch

if TYPE_CHECKING:
    from kafkad.replication.partition import Partition

log = logging.getLogger(__name__)

E = ErrorCode
APPEND_TIMEOUT_S = 5.0
_READ_CHUNK = 1 << 20
# TransactionStateManager.appendTransactionToLog's mapping of a failed append.
_APPEND_ERRORS = {
    E.UNKNOWN_TOPIC_OR_PARTITION: E.COORDINATOR_NOT_AVAILABLE,
    E.NOT_ENOUGH_REPLICAS: E.COORDINATOR_NOT_AVAILABLE,
    E.NOT_ENOUGH_REPLICAS_AFTER_APPEND: E.COORDINATOR_NOT_AVAILABLE,
    E.REQUEST_TIMED_OUT: E.COORDINATOR_NOT_AVAILABLE,
    E.NOT_LEADER_OR_FOLLOWER: E.NOT_COORDINATOR,
    E.KAFKA_STORAGE_ERROR: E.NOT_COORDINATOR,
    E.MESSAGE_TOO_LARGE: E.UNKNOWN_SERVER_ERROR,
    E.RECORD_LIST_TOO_LARGE: E.UNKNOWN_SERVER_ERROR,
}


def replay_partition(part: Any) -> Iterator[KeyValue]:
    """Every record of one partition, oldest first (blocking reads)."""
    offset = part.log_start_offset
    end = part.log_end_offset
    while offset < end:
        result = part.log.read(offset, _READ_CHUNK, max_offset=end, min_one_batch=True)
        if not result.slices:
            break
        data = b"".join(s.read() for s in result.slices)
        last = offset - 1
        for header in iter_headers(data):
            last = header.last_offset
            if header.is_control:
                continue
            try:
                records = decode_batch(data, header.position).records
            except KafkaError as exc:
                log.warning(
                    "%s: batch at %d cannot be decoded, skipped: %s", TXN_TOPIC, header.base_offset, exc
                )
                continue
            for rec in records:
                if rec.offset >= offset and rec.key is not None:
                    yield rec.key, rec.value
        if last < offset:
            break
        offset = last + 1


class TxnLogStore:
    """The coordinator's TxnLog on the broker's replicas. Runs on the event loop."""

    def __init__(
        self, replicas: Any, clock: Any, num_partitions: int, topic_configs: dict[str, str], *, cluster: bool
    ) -> None:
        self.replicas = replicas
        self.clock = clock
        self.num_partitions = num_partitions
        self.topic_configs = topic_configs
        self.cluster = cluster
        self.coordinator: TransactionCoordinator | None = None
        self.loaded: set[int] = set()
        self._loading: dict[int, asyncio.Task[None]] = {}
        self._epochs: dict[int, int] = {}
        self._ends: dict[int, int] = {}  # log end offset of each loaded partition after our last write
        self._creating: asyncio.Future[None] | None = None
        self._index: dict[str, tuple[int, int]] = {}  # id -> (partition count, its partition)
        # cluster mode: the topic's partition count in the metadata cache (0 until known)
        self.cluster_count: Callable[[], int] | None = None

    def partition_of(self, txn_id: str) -> int:
        """The id's partition; in a cluster by the topic's partition count as the metadata knows it (Kafka's
        getTransactionTopicPartitionCount), so it agrees with FindCoordinator whatever this broker's config."""
        n = self.num_partitions
        if self.cluster_count is not None:
            n = self.cluster_count() or n
        found = self._index.get(txn_id)
        if found is None or found[0] != n:
            if len(self._index) >= 65536:
                self._index.clear()
            found = self._index[txn_id] = (n, partition_for(txn_id, n))
        return found[1]

    # --- TxnLog --------------------------------------------------------------------------------------------------
    def error_for(self, transactional_id: str) -> ErrorCode | None:
        index = self.partition_of(transactional_id)
        if index in self.loaded:
            return None
        if index in self._loading:
            return E.COORDINATOR_LOAD_IN_PROGRESS
        return E.NOT_COORDINATOR if self.cluster else E.COORDINATOR_NOT_AVAILABLE

    def coordinator_epoch(self, transactional_id: str) -> int:
        return self._epochs.get(self.partition_of(transactional_id), 0)

    async def append(self, transactional_id: str, record: KeyValue) -> ErrorCode:
        part = self.replicas.get(TXN_TOPIC, self.partition_of(transactional_id))
        if part is None:
            return E.NOT_COORDINATOR if self.cluster else E.COORDINATOR_NOT_AVAILABLE
        now = self.clock.time_ms()
        batch = bytearray(build_batch([SimpleRecord(record[0], record[1], timestamp=now)]))
        try:
            result = part.append_as_leader(memoryview(batch), now_ms=now, required_acks=-1)
            self._ends[part.index] = part.log_end_offset
            if self.cluster:
                await asyncio.wait_for(part.wait_replicated(result.last_offset), APPEND_TIMEOUT_S)
        except TimeoutError:
            return E.COORDINATOR_NOT_AVAILABLE
        except KafkaError as e:
            log.info("%s-%d: append failed: %s", TXN_TOPIC, part.index, e)
            return _APPEND_ERRORS.get(e.code, e.code)
        return E.NONE

    # --- standalone: the whole topic ---------------------------------------------------------------------------
    def _existing(self) -> int:
        n = 0
        while self.replicas.get(TXN_TOPIC, n) is not None or self.replicas.is_offline(TXN_TOPIC, n):
            n += 1
        return n

    async def start(self) -> None:
        """Standalone: replay what exists (in the executor), coordinate it, resume unfinished markers."""
        have = self._existing()
        parts = [self.replicas.get(TXN_TOPIC, i) for i in range(have)]
        if have != self.num_partitions and any(p is None or p.log_end_offset for p in parts):
            log.warning(
                "%s has %d partitions, not the configured %d: using %d",
                TXN_TOPIC,
                have,
                self.num_partitions,
                have,
            )
            self.num_partitions = have  # the hash must match where the data is
        loop = asyncio.get_running_loop()
        records: list[KeyValue] = await loop.run_in_executor(
            None, lambda: [kv for p in parts if p is not None for kv in replay_partition(p)]
        )
        assert self.coordinator is not None
        pending = self.coordinator.load(records)
        self.loaded.update(i for i, p in enumerate(parts) if p is not None)
        if have:
            log.info("%s: loaded %d records of %d partitions", TXN_TOPIC, len(records), have)
        self.coordinator.resume(pending)

    @property
    def ready(self) -> bool:
        return self.cluster or len(self.loaded) >= self.num_partitions

    async def ensure_topic(self) -> None:
        """Standalone: create the topic unless complete; raises KafkaError(COORDINATOR_NOT_AVAILABLE)."""
        if self.ready:
            return
        if self._creating is None or self._creating.done():
            self._creating = asyncio.ensure_future(self._create())
        try:
            await asyncio.shield(self._creating)
        except Exception as exc:
            log.warning("creating %s failed: %s", TXN_TOPIC, exc)
            raise KafkaError(E.COORDINATOR_NOT_AVAILABLE, f"cannot create {TXN_TOPIC}") from exc

    async def _create(self) -> None:
        have = self._existing()
        if have == 0:
            self.replicas.create_topic(TXN_TOPIC, 1, self.topic_configs)
            have = 1
        while have < self.num_partitions:
            await asyncio.sleep(0)  # other connections run between two partitions' filesystem work
            self.replicas.add_partitions(TXN_TOPIC, have + 1)
            have += 1
        self.loaded.update(range(self.num_partitions))
        log.info("created %s with %d partitions", TXN_TOPIC, have)

    def close(self) -> None:
        if self._creating is not None and not self._creating.done():
            self._creating.cancel()
        for task in self._loading.values():
            task.cancel()

    # --- cluster: follow leadership ----------------------------------------------------------------------------
    def on_leader(self, part: Partition) -> None:
        if part.topic != TXN_TOPIC:
            return
        index = part.index
        if index in self.loaded and self._ends.get(index) == part.log_end_offset:
            # Still the leader (a new leader epoch after an ISR change) and the log holds only what this
            # coordinator wrote: as Kafka, no new election; the coordinator epoch stays the one it loaded
            # with, so in-flight commits go on. A log that changed meanwhile (another leader's records,
            # a truncation) is loaded again.
            return
        self.loaded.discard(index)
        old = self._loading.pop(index, None)
        if old is not None:
            old.cancel()
        self._loading[index] = asyncio.get_running_loop().create_task(self._load(part, part.leader_epoch))

    def on_follower(self, part: Partition) -> None:
        if part.topic != TXN_TOPIC:
            return
        index = part.index
        task = self._loading.pop(index, None)
        if task is not None:
            task.cancel()
        self.loaded.discard(index)
        if self.coordinator is not None:
            gone = [t for t in self.coordinator.txns if self.partition_of(t) == index]
            self.coordinator.unload(gone)
            if gone:
                log.info(
                    "%s-%d: no longer its leader; unloaded %d transactional ids", TXN_TOPIC, index, len(gone)
                )

    async def _load(self, part: Partition, epoch: int) -> None:
        index = part.index
        try:
            loop = asyncio.get_running_loop()
            records = await loop.run_in_executor(None, lambda: list(replay_partition(part)))
            if self.coordinator is None or not part.is_leader or part.leader_epoch != epoch:
                return
            stale = [t for t in self.coordinator.txns if self.partition_of(t) == index]
            self.coordinator.unload(stale)
            pending = self.coordinator.load(records)
            self._epochs[index] = epoch
            self._ends[index] = part.log_end_offset
            self.loaded.add(index)
            log.info(
                "%s-%d: leader at epoch %d; loaded %d records, %d transactions to complete",
                TXN_TOPIC,
                index,
                epoch,
                len(records),
                len(pending),
            )
            self.coordinator.resume(pending)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("%s-%d: loading its transactions failed", TXN_TOPIC, index)
        finally:
            if self._loading.get(index) is asyncio.current_task():
                del self._loading[index]
