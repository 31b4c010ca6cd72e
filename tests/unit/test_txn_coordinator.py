"""The transaction coordinator's state machine and error codes (Kafka's TransactionCoordinator.scala), on a
memory __transaction_state and a recording marker sender (our own interfaces, faked; the coordinator real)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from kafkad.clock import ManualClock
from kafkad.coordinator.transaction.coordinator import (
    KeyValue,
    TransactionCoordinator,
    TxnConfig,
    TxnDescription,
    TxnMarker,
)
from kafkad.coordinator.transaction.records import decode_key, decode_value
from kafkad.coordinator.transaction.state import MAX_EPOCH, TxnState
from kafkad.protocol.errors import ErrorCode as E

S = TxnState


class MemoryLog:
    def __init__(self) -> None:
        self.records: list[KeyValue] = []
        self.owned = True
        self.epoch = 0
        self.fail_with: E | None = None

    def error_for(self, transactional_id: str) -> E | None:
        return None if self.owned else E.NOT_COORDINATOR

    def coordinator_epoch(self, transactional_id: str) -> int:
        return self.epoch

    async def append(self, transactional_id: str, record: KeyValue) -> E:
        await asyncio.sleep(0)  # an append suspends, as the real one does
        if self.fail_with is not None:
            return self.fail_with
        self.records.append(record)
        return E.NONE

    def states(self, txn_id: str) -> list[S | None]:
        out: list[S | None] = []
        for k, v in self.records:
            if decode_key(k) == txn_id:
                out.append(None if v is None else decode_value(v).state)
        return out


class Markers:
    def __init__(self) -> None:
        self.sent: list[TxnMarker] = []
        self.block: asyncio.Event | None = None

    async def send(self, marker: TxnMarker, still_valid: Callable[[], bool]) -> bool:
        if self.block is not None:
            await self.block.wait()
            if not still_valid():
                return False
        self.sent.append(marker)
        return True


class Env:
    def __init__(self, **cfg: Any) -> None:
        self.clock = ManualClock()
        self.log = MemoryLog()
        self.markers = Markers()
        self.next_pid = 1000
        self.coord = TransactionCoordinator(TxnConfig(**cfg), self.clock, self.log, self.markers, self._pid)

    async def _pid(self) -> int:
        self.next_pid += 1
        return self.next_pid

    async def settle(self) -> None:
        for _ in range(20):
            await asyncio.sleep(0)

    async def ongoing(self, txn_id: str = "t", timeout_ms: int = 60000) -> tuple[int, int]:
        r = await self.coord.init_producer_id(txn_id, timeout_ms)
        assert r.error is E.NONE
        assert (
            await self.coord.add_partitions(txn_id, r.producer_id, r.producer_epoch, [("out", 0), ("out", 1)])
            is E.NONE
        )
        return r.producer_id, r.producer_epoch


def run(fn: Callable[[Env], Coroutine[Any, Any, None]], **cfg: Any) -> None:
    asyncio.run(fn(Env(**cfg)))


def test_commit_goes_prepare_markers_complete_in_the_log() -> None:
    async def body(env: Env) -> None:
        pid, epoch = await env.ongoing()
        assert await env.coord.end_txn("t", pid, epoch, committed=True) is E.NONE
        await env.settle()
        assert env.markers.sent == [TxnMarker(pid, epoch, True, 0, [("out", 0), ("out", 1)])]
        assert env.log.states("t") == [S.EMPTY, S.ONGOING, S.PREPARE_COMMIT, S.COMPLETE_COMMIT]
        assert env.coord.txns["t"].partitions == set()
        # a retry of the same EndTxn is answered NONE; the opposite outcome is INVALID_TXN_STATE
        assert await env.coord.end_txn("t", pid, epoch, committed=True) is E.NONE
        assert await env.coord.end_txn("t", pid, epoch, committed=False) is E.INVALID_TXN_STATE
        # the next transaction starts from CompleteCommit
        assert await env.coord.add_partitions("t", pid, epoch, [("out", 2)]) is E.NONE
        assert env.coord.txns["t"].partitions == {("out", 2)}

    run(body)


def test_abort_writes_abort_markers() -> None:
    async def body(env: Env) -> None:
        pid, epoch = await env.ongoing()
        assert await env.coord.end_txn("t", pid, epoch, committed=False) is E.NONE
        await env.settle()
        assert [m.committed for m in env.markers.sent] == [False]
        assert env.coord.txns["t"].state is S.COMPLETE_ABORT

    run(body)


def test_bad_input_gets_kafkas_error_codes() -> None:
    async def body(env: Env) -> None:
        c = env.coord
        assert (await c.init_producer_id("t", 0)).error is E.INVALID_TRANSACTION_TIMEOUT
        assert (await c.init_producer_id("t", 900_001)).error is E.INVALID_TRANSACTION_TIMEOUT
        assert (await c.init_producer_id("", 1000)).error is E.INVALID_REQUEST
        # unknown transactional id / producer id
        assert await c.add_partitions("nobody", 1, 0, [("out", 0)]) is E.INVALID_PRODUCER_ID_MAPPING
        assert await c.end_txn("nobody", 1, 0, True) is E.INVALID_PRODUCER_ID_MAPPING
        r = await c.init_producer_id("t", 1000)
        assert (
            await c.add_partitions("t", r.producer_id + 1, 0, [("out", 0)]) is E.INVALID_PRODUCER_ID_MAPPING
        )
        # EndTxn with no partitions added: the id is Empty
        assert await c.end_txn("t", r.producer_id, r.producer_epoch, True) is E.INVALID_TXN_STATE
        # a stale epoch: a second InitProducerId fenced the first producer
        r2 = await c.init_producer_id("t", 1000)
        assert (r2.producer_id, r2.producer_epoch) == (r.producer_id, r.producer_epoch + 1)
        assert await c.add_partitions("t", r.producer_id, r.producer_epoch, [("out", 0)]) is E.PRODUCER_FENCED
        assert await c.end_txn("t", r.producer_id, r.producer_epoch, True) is E.PRODUCER_FENCED
        assert c.verify_partitions("t", r.producer_id, r.producer_epoch, [("out", 0)]) is E.PRODUCER_FENCED
        # not the coordinator
        env.log.owned = False
        assert (await c.init_producer_id("t", 1000)).error is E.NOT_COORDINATOR
        assert await c.end_txn("t", r2.producer_id, r2.producer_epoch, True) is E.NOT_COORDINATOR

    run(body)


def test_concurrent_requests_while_prepare_is_unfinished() -> None:
    async def body(env: Env) -> None:
        env.markers.block = asyncio.Event()
        pid, epoch = await env.ongoing()
        assert await env.coord.end_txn("t", pid, epoch, committed=True) is E.NONE
        assert await env.coord.add_partitions("t", pid, epoch, [("out", 3)]) is E.CONCURRENT_TRANSACTIONS
        assert await env.coord.end_txn("t", pid, epoch, committed=True) is E.CONCURRENT_TRANSACTIONS
        assert await env.coord.end_txn("t", pid, epoch, committed=False) is E.INVALID_TXN_STATE
        assert (await env.coord.init_producer_id("t", 1000)).error is E.CONCURRENT_TRANSACTIONS
        env.markers.block.set()
        await env.settle()
        assert env.coord.txns["t"].state is S.COMPLETE_COMMIT

    run(body)


def test_init_producer_id_on_ongoing_aborts_with_the_old_producer_fenced() -> None:
    async def body(env: Env) -> None:
        pid, epoch = await env.ongoing()
        r = await env.coord.init_producer_id("t", 1000)
        assert r.error is E.CONCURRENT_TRANSACTIONS  # the client retries
        await env.settle()
        assert env.markers.sent[-1] == TxnMarker(pid, epoch + 1, False, 0, [("out", 0), ("out", 1)])
        assert env.coord.txns["t"].state is S.COMPLETE_ABORT
        assert await env.coord.end_txn("t", pid, epoch, committed=True) is E.PRODUCER_FENCED
        r = await env.coord.init_producer_id("t", 1000)
        assert (r.error, r.producer_epoch) == (E.NONE, epoch + 2)

    run(body)


def test_timed_out_transaction_is_aborted_and_its_producer_fenced() -> None:
    async def body(env: Env) -> None:
        pid, epoch = await env.ongoing(timeout_ms=1000)
        env.clock.advance(999)
        assert await env.coord.abort_timed_out() == 0
        env.clock.advance(2)
        assert await env.coord.abort_timed_out() == 1
        await env.settle()
        assert env.coord.txns["t"].state is S.COMPLETE_ABORT
        assert env.coord.txns["t"].producer_epoch == epoch + 1
        # a commit after the timeout abort: the producer is fenced
        assert await env.coord.end_txn("t", pid, epoch, committed=True) is E.PRODUCER_FENCED
        assert await env.coord.add_partitions("t", pid, epoch, [("out", 0)]) is E.PRODUCER_FENCED

    run(body)


def test_kip360_epoch_bump_with_expected_producer() -> None:
    async def body(env: Env) -> None:
        r = await env.coord.init_producer_id("t", 1000)
        # the producer bumps its own epoch after an abortable error
        b = await env.coord.init_producer_id("t", 1000, (r.producer_id, r.producer_epoch))
        assert (b.error, b.producer_id, b.producer_epoch) == (E.NONE, r.producer_id, r.producer_epoch + 1)
        # a retry of that call (the answer was lost) gets the same epoch
        again = await env.coord.init_producer_id("t", 1000, (r.producer_id, r.producer_epoch))
        assert (again.error, again.producer_epoch) == (E.NONE, b.producer_epoch)
        # an older epoch is fenced
        old = await env.coord.init_producer_id("t", 1000, (r.producer_id, r.producer_epoch - 1))
        assert old.error is E.PRODUCER_FENCED

    run(body)


def test_exhausted_epoch_rotates_the_producer_id() -> None:
    async def body(env: Env) -> None:
        r = await env.coord.init_producer_id("t", 1000)
        env.coord.txns["t"].producer_epoch = MAX_EPOCH - 1
        n = await env.coord.init_producer_id("t", 1000)
        assert n.error is E.NONE
        assert n.producer_id != r.producer_id and n.producer_epoch == 0

    run(body)


def test_failed_append_leaves_the_state_and_answers_the_mapped_error() -> None:
    async def body(env: Env) -> None:
        pid, epoch = await env.ongoing()
        env.log.fail_with = E.COORDINATOR_NOT_AVAILABLE
        assert await env.coord.end_txn("t", pid, epoch, committed=True) is E.COORDINATOR_NOT_AVAILABLE
        meta = env.coord.txns["t"]
        assert (meta.state, meta.pending_state) == (S.ONGOING, None)
        env.log.fail_with = None
        assert await env.coord.end_txn("t", pid, epoch, committed=True) is E.NONE

    run(body)


def test_new_coordinator_loads_and_finishes_a_prepared_commit() -> None:
    async def body(env: Env) -> None:
        env.markers.block = asyncio.Event()
        pid, epoch = await env.ongoing()
        assert await env.coord.end_txn("t", pid, epoch, committed=True) is E.NONE
        # the coordinator moves before the markers land: the old one gives up
        env.log.owned = False
        env.markers.block.set()
        await env.settle()
        assert env.log.states("t")[-1] is S.PREPARE_COMMIT
        # a new coordinator replays the partition and resends
        other = Env()
        other.log.epoch = 1
        pending = other.coord.load(env.log.records)
        assert pending == ["t"]
        other.coord.resume(pending)
        await other.settle()
        assert other.markers.sent == [TxnMarker(pid, epoch, True, 1, [("out", 0), ("out", 1)])]
        assert other.coord.txns["t"].state is S.COMPLETE_COMMIT

    run(body)


def test_idle_ids_expire_with_a_tombstone() -> None:
    async def body(env: Env) -> None:
        await env.coord.init_producer_id("idle", 1000)
        await env.ongoing("busy")
        env.clock.advance(1001)
        assert await env.coord.expire_ids() == 1
        assert "idle" not in env.coord.txns and "busy" in env.coord.txns
        assert env.log.states("idle")[-1] is None
        assert env.coord.describe("idle") is E.TRANSACTIONAL_ID_NOT_FOUND
        # a replay after the tombstone does not bring it back
        fresh = Env()
        fresh.coord.load(env.log.records)
        assert "idle" not in fresh.coord.txns

    run(body, id_expiration_ms=1000)


def test_verify_only_and_describe_and_list() -> None:
    async def body(env: Env) -> None:
        pid, epoch = await env.ongoing()
        found = env.coord.verify_partitions("t", pid, epoch, [("out", 0), ("out", 9)])
        assert found == {("out", 0): E.NONE, ("out", 9): E.TRANSACTION_ABORTABLE}
        d = env.coord.describe("t")
        assert isinstance(d, TxnDescription)
        assert (d.state, d.producer_id, d.partitions) == (S.ONGOING, pid, frozenset({("out", 0), ("out", 1)}))
        await env.coord.init_producer_id("other", 1000)
        assert {t for t, _, _ in env.coord.list_transactions([], [])} == {"t", "other"}
        assert env.coord.list_transactions([S.ONGOING], []) == [("t", pid, S.ONGOING)]
        env.clock.advance(500)
        assert env.coord.list_transactions([], [], 1000) == []
        assert [t for t, _, _ in env.coord.list_transactions([], [], 400)] == ["t"]

    run(body)


@pytest.mark.parametrize("committed", [True, False])
def test_unload_then_requests_answer_not_coordinator(committed: bool) -> None:
    async def body(env: Env) -> None:
        pid, epoch = await env.ongoing()
        env.coord.unload(["t"])
        env.log.owned = False
        assert await env.coord.end_txn("t", pid, epoch, committed) is E.NOT_COORDINATOR

    run(body)


def test_txn_verifier_answers_as_kafkas_produce_verification() -> None:
    """KIP-890 (the txn_verifier service Produce asks): NONE for a partition in the ongoing transaction,
    INVALID_TXN_STATE for one not added, INVALID_PRODUCER_EPOCH for a fenced producer."""
    from kafkad.coordinator.transaction.service import TxnVerifierService

    class Broker:
        services: dict[str, Any] = {}

    async def body(env: Env) -> None:
        pid, epoch = await env.ongoing()
        verifier = TxnVerifierService(Broker(), env.coord, env.log, None)  # type: ignore[arg-type]
        assert await verifier.verify("t", pid, epoch, "out", 0) is E.NONE
        assert await verifier.verify("t", pid, epoch, "out", 5) is E.INVALID_TXN_STATE
        assert await verifier.verify("t", pid, epoch - 1, "out", 0) is E.INVALID_PRODUCER_EPOCH
        assert await verifier.verify("nobody", pid, epoch, "out", 0) is E.INVALID_PRODUCER_ID_MAPPING

    run(body)
