"""ReplicaManager.apply_leader_and_isr / stop_replicas: Kafka's fencing and the role changes, over the fake
log manager of test_partition (our own interface) and a real FetcherManager whose leader address refuses."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from kafkad.protocol.errors import ErrorCode, KafkaError
from kafkad.replication.fetcher import FetcherConfig, FetcherManager
from kafkad.replication.manager import ReplicaManager
from kafkad.replication.partition import Partition, Role
from kafkad.storage.checkpoints import read_epochs
from kafkad.storage.leader_epoch import CHECKPOINT_FILE, LeaderEpochCache
from tests.unit.replication.test_partition import FakeLogManager


class _Logs(FakeLogManager):
    def __init__(self) -> None:
        super().__init__()
        self.deleted_partitions: list[tuple[str, int]] = []

    def delete_partition(self, topic: str, partition: int) -> None:
        self.deleted_partitions.append((topic, partition))
        self.logs_.pop((topic, partition), None)


def _state(p: int, leader: int, epoch: int, replicas: tuple[int, ...] = (1, 2)) -> dict[str, Any]:
    return {
        "topic_name": "t",
        "partition_index": p,
        "controller_epoch": 3,
        "leader": leader,
        "leader_epoch": epoch,
        "isr": list(replicas),
        "partition_epoch": 7,
        "replicas": list(replicas),
    }


def _role(p: Partition) -> Role:
    """p.role, read afresh: mypy keeps an `is` narrowing of the attribute across the calls that change it."""
    return p.role


LIVE = [{"broker_id": 2, "host_name": "127.0.0.1", "port": 1}]


def test_leader_and_isr_fencing_roles_and_listeners() -> None:
    async def go() -> None:
        rm = ReplicaManager(_Logs(), broker_id=1)
        fetchers = FetcherManager(FetcherConfig(broker_id=1, backoff_ms=10), lambda: 0)
        rm.enter_cluster_mode(fetchers, lambda: 1000)
        events: list[tuple[str, int]] = []
        rm.add_leadership_listener(
            lambda p: events.append(("leader", p.index)), lambda p: events.append(("follower", p.index))
        )
        got = rm.apply_leader_and_isr(9, 3, [_state(0, 1, 1), _state(1, 2, 1), _state(2, 2, 1, (2, 3))], LIVE)
        assert got == {
            ("t", 0): ErrorCode.NONE,
            ("t", 1): ErrorCode.NONE,
            ("t", 2): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        }
        p0, p1 = rm.get("t", 0), rm.get("t", 1)
        assert isinstance(p0, Partition) and isinstance(p1, Partition)
        assert p0.role is Role.LEADER and p0.zk_version == 7 and p0.isr == (1, 2)
        assert p1.role is Role.FOLLOWER and p1.leader_id == 2 and fetchers.following(("t", 1)) == 2
        assert sorted(events) == [("follower", 1), ("leader", 0)]
        # the same leader epoch again: stale; an older controller: refused whole
        assert rm.apply_leader_and_isr(9, 3, [_state(0, 1, 1)], LIVE) == {
            ("t", 0): ErrorCode.STALE_CONTROLLER_EPOCH
        }
        with pytest.raises(KafkaError) as e:
            rm.apply_leader_and_isr(9, 2, [_state(0, 1, 5)], LIVE)
        assert e.value.code is ErrorCode.STALE_CONTROLLER_EPOCH
        # leadership moves: 0 becomes a follower (fetching), 1 the leader (its fetcher dropped)
        rm.apply_leader_and_isr(9, 4, [_state(0, 2, 2), _state(1, 1, 2)], LIVE)
        assert _role(p0) is Role.FOLLOWER and fetchers.following(("t", 0)) == 2
        assert _role(p1) is Role.LEADER and fetchers.following(("t", 1)) is None
        # StopReplica: an older leader epoch is fenced; delete removes the replica and its log
        assert rm.stop_replicas(4, [("t", 0, 1)], delete=True) == {("t", 0): ErrorCode.FENCED_LEADER_EPOCH}
        assert rm.stop_replicas(4, [("t", 0, 2)], delete=True) == {("t", 0): ErrorCode.NONE}
        assert rm.get("t", 0) is None and rm.log_manager.deleted_partitions == [("t", 0)]  # type: ignore[attr-defined]
        assert fetchers.following(("t", 0)) is None
        await fetchers.shutdown()

    asyncio.run(go())


def test_cluster_mode_keeps_the_checkpointed_high_watermark() -> None:
    """A restarted broker's log may hold an uncommitted tail above its checkpointed HW (it led, was
    killed, its followers had not fetched the tail): cluster mode must not expose it as committed (the
    loaded Partition, a standalone leader with ISR = {self}, first moves the HW to the LEO)."""

    async def go() -> None:
        logs = _Logs()
        plog = logs.create_partition("t", 0)
        plog.log_end_offset, plog.high_watermark = 100, 40
        rm = ReplicaManager(logs, broker_id=1)  # type: ignore[arg-type]
        rm.load_from_logs()
        rm.enter_cluster_mode(FetcherManager(FetcherConfig(broker_id=1), lambda: 0), lambda: 0)
        part = rm.get("t", 0)
        assert part is not None and part.high_watermark == 40
        assert part.read_records(40, 1000, min_one_batch=True) == "slice"
        assert plog.reads[-1][2] == 40  # a consumer on this replica reads below the HW only

    asyncio.run(go())


class _HeldExecutor(ThreadPoolExecutor):
    """The loop's default executor, holding every job until run_all(): what the loop itself wrote shows."""

    def __init__(self) -> None:
        super().__init__(1)
        self.held: list[tuple[Future[Any], Callable[..., Any], tuple[Any, ...]]] = []

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        fut: Future[Any] = Future()
        self.held.append((fut, fn, args))
        return fut

    def run_all(self) -> None:
        held, self.held = self.held, []
        for fut, fn, args in held:
            fut.set_result(fn(*args))


def test_becoming_leader_writes_the_epoch_checkpoints_off_the_loop(tmp_path: Path) -> None:
    """1,000 partitions becoming leader wrote 1,000 leader-epoch checkpoints on the event loop (seconds on
    a busy disk); the loop now only updates the caches and a thread writes the files, newest last."""

    async def go() -> None:
        held = _HeldExecutor()
        asyncio.get_running_loop().set_default_executor(held)
        logs = _Logs()
        caches = []
        for p in range(3):
            (tmp_path / f"t-{p}").mkdir()
            cache = LeaderEpochCache(tmp_path / f"t-{p}" / CHECKPOINT_FILE)
            logs.create_partition("t", p).leader_epoch_cache = cache  # type: ignore[attr-defined]
            caches.append(cache)
        rm = ReplicaManager(logs, broker_id=1)
        rm.enter_cluster_mode(FetcherManager(FetcherConfig(broker_id=1, backoff_ms=10), lambda: 0), lambda: 1)
        got = rm.apply_leader_and_isr(9, 3, [_state(p, 1, 5) for p in range(3)], LIVE)
        assert set(got.values()) == {ErrorCode.NONE}
        assert [c.latest_epoch for c in caches] == [5, 5, 5]  # leaders at once, in memory
        assert not any(c.path is not None and c.path.exists() for c in caches)  # the loop wrote no file
        held.run_all()
        assert [read_epochs(c.path) for c in caches if c.path is not None] == [[(5, 0)]] * 3
        caches[0].truncate_from_end(0)  # a later change on the loop is written at once, and stays
        held.run_all()
        assert caches[0].path is not None and read_epochs(caches[0].path) == []

    asyncio.run(go())
