"""TxnLogStore following __transaction_state leadership (cluster mode), on fake partitions (our own
replication interfaces; the store and the coordinator are real)."""

from __future__ import annotations

import asyncio
from typing import Any

from kafkad.clock import ManualClock
from kafkad.coordinator.transaction.coordinator import TransactionCoordinator, TxnConfig
from kafkad.coordinator.transaction.log_store import TxnLogStore
from kafkad.coordinator.transaction.records import TXN_TOPIC, partition_for
from kafkad.protocol.errors import ErrorCode as E

N = 3
TXN = "t"
INDEX = partition_for(TXN, N)


class Result:
    def __init__(self, last: int) -> None:
        self.last_offset = last


class FakePart:
    def __init__(self) -> None:
        self.topic, self.index = TXN_TOPIC, INDEX
        self.leader_epoch = 0
        self.is_leader = True
        self.log_start_offset = 0
        self.log_end_offset = 0
        self.high_watermark = 0

    def append_as_leader(self, records: memoryview, *, now_ms: int, required_acks: int) -> Result:
        self.log_end_offset += 1
        self.high_watermark = self.log_end_offset
        return Result(self.log_end_offset - 1)

    async def wait_replicated(self, last_offset: int) -> None:
        return None


class Replicas:
    def __init__(self, part: FakePart) -> None:
        self.part = part

    def get(self, topic: str, index: int) -> Any:
        return self.part if (topic, index) == (TXN_TOPIC, INDEX) else None


class NoMarkers:
    async def send(self, marker: Any, still_valid: Any) -> bool:
        return True


async def _pid() -> int:
    return 7


def _setup() -> tuple[FakePart, TxnLogStore, TransactionCoordinator]:
    part = FakePart()
    store = TxnLogStore(Replicas(part), ManualClock(), N, {}, cluster=True)
    coord = TransactionCoordinator(TxnConfig(num_partitions=N), ManualClock(), store, NoMarkers(), _pid)
    store.coordinator = coord
    return part, store, coord


async def _settle() -> None:
    for _ in range(50):
        await asyncio.sleep(0.001)


def test_follows_leadership_and_keeps_state_across_an_epoch_bump() -> None:
    async def body() -> None:
        part, store, coord = _setup()
        assert store.error_for(TXN) is E.NOT_COORDINATOR
        store.on_leader(part)  # type: ignore[arg-type]
        assert store.error_for(TXN) is E.COORDINATOR_LOAD_IN_PROGRESS
        await _settle()
        assert store.error_for(TXN) is None
        assert (await coord.init_producer_id(TXN, 1000)).error is E.NONE
        # the same leader at a new epoch (an ISR change), its log unchanged: no reload, same coordinator epoch
        part.leader_epoch = 1
        store.on_leader(part)  # type: ignore[arg-type]
        assert store.error_for(TXN) is None and store.coordinator_epoch(TXN) == 0
        assert TXN in coord.txns
        # records this coordinator did not write (another leader's, replicated here): loaded again
        part.leader_epoch = 2
        part.log_end_offset += 1
        store.on_leader(part)  # type: ignore[arg-type]
        assert store.error_for(TXN) is E.COORDINATOR_LOAD_IN_PROGRESS
        # a follower forgets the partition's ids
        part.is_leader = False
        store.on_follower(part)  # type: ignore[arg-type]
        assert store.error_for(TXN) is E.NOT_COORDINATOR and TXN not in coord.txns

    asyncio.run(body())


def test_partition_follows_the_topics_real_partition_count() -> None:
    """A broker configured with another transaction.state.log.num.partitions than the topic has hashes by
    the topic's count (as FindCoordinator does), once the metadata knows it."""
    _, store, _ = _setup()
    count = 0
    store.cluster_count = lambda: count
    assert store.partition_of("abc") == partition_for("abc", N)  # unknown yet: the configured count
    count = 50
    assert store.partition_of("abc") == partition_for("abc", 50) != partition_for("abc", N)
