import asyncio
import tempfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from kafkad.protocol.errors import ErrorCode, KafkaError
from kafkad.replication.manager import ReplicaManager
from kafkad.replication.partition import Partition, Role

# Partition directories of the fake logs (partition.metadata), removed when the test process exits.
_FAKE_DIRS = tempfile.TemporaryDirectory(prefix="fakelogs-")


@dataclass
class Cfg:
    min_insync_replicas: int = 1
    sync_on_append: bool = False  # no flush settings (the group commit has its own tests)


@dataclass
class FakeLog:
    topic: str = "t"
    partition: int = 0
    config: Cfg = field(default_factory=Cfg)
    log_start_offset: int = 0
    log_end_offset: int = 0
    high_watermark: int = 0
    recovery_point: int = 0
    reads: list[tuple[int, int, Any]] = field(default_factory=list)
    directory: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(dir=_FAKE_DIRS.name)))

    def append(self, records: memoryview, **kwargs: Any) -> tuple[int, int]:
        base = self.log_end_offset
        self.log_end_offset += len(records)
        return base, self.log_end_offset - 1

    def offset_for_timestamp(self, ts_ms: int) -> tuple[int, int] | None:
        return None

    def delete_records(self, before_offset: int) -> int:
        return before_offset

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        return epoch, self.log_end_offset

    def read(self, offset: int, max_bytes: int, **kwargs: Any) -> str:
        self.reads.append((offset, max_bytes, kwargs.get("max_offset")))
        return "slice"


def test_leader_hw_follows_leo_and_wakes_waiters() -> None:
    async def go() -> None:
        log = FakeLog()
        p = Partition(log, broker_id=1)
        waiter = p.data_waiter()
        assert not waiter.done()
        assert p.append_as_leader(memoryview(b"abc"), now_ms=0, required_acks=-1) == (0, 2)
        assert log.high_watermark == 3
        assert waiter.done()
        await asyncio.wait_for(p.wait_replicated(2), 30)  # HW already covers it

    asyncio.run(go())


def test_acks_all_waits_for_follower_in_isr() -> None:
    async def go() -> None:
        log = FakeLog()
        p = Partition(log, broker_id=1)
        p.become_leader(3, isr=[1, 2], replicas=[1, 2])
        p.append_as_leader(memoryview(b"ab"), now_ms=0, required_acks=-1)
        assert p.high_watermark == 0  # follower 2 has nothing yet
        task = asyncio.ensure_future(p.wait_replicated(1))
        await asyncio.sleep(0)
        assert not task.done()
        p.update_follower_position(2, 1)
        assert p.high_watermark == 1
        await asyncio.sleep(0)
        assert not task.done()
        p.update_follower_position(2, 2)
        await asyncio.wait_for(task, 30)
        assert p.high_watermark == 2

    asyncio.run(go())


def test_follower_rejects_produce_and_fails_waiters() -> None:
    async def go() -> None:
        p = Partition(FakeLog(), broker_id=1)
        p.become_leader(1, isr=[1, 2], replicas=[1, 2])
        p.append_as_leader(memoryview(b"a"), now_ms=0, required_acks=1)
        task = asyncio.ensure_future(p.wait_replicated(0))
        await asyncio.sleep(0)
        p.become_follower(2, leader_id=2)
        assert p.role is Role.FOLLOWER
        with pytest.raises(KafkaError) as e:
            await task
        assert e.value.code is ErrorCode.NOT_LEADER_OR_FOLLOWER
        with pytest.raises(KafkaError):
            p.append_as_leader(memoryview(b"a"), now_ms=0, required_acks=1)

    asyncio.run(go())


def test_min_isr_and_offset_range() -> None:
    log = FakeLog(config=Cfg(min_insync_replicas=2))
    p = Partition(log, broker_id=1)
    with pytest.raises(KafkaError) as e:
        p.append_as_leader(memoryview(b"a"), now_ms=0, required_acks=-1)
    assert e.value.code is ErrorCode.NOT_ENOUGH_REPLICAS
    p.append_as_leader(memoryview(b"ab"), now_ms=0, required_acks=1)
    assert p.read_records(2, 100, min_one_batch=True) == "slice"
    assert log.reads[-1] == (2, 100, 2)
    with pytest.raises(KafkaError) as e:
        p.read_records(3, 100, min_one_batch=True)
    assert e.value.code is ErrorCode.OFFSET_OUT_OF_RANGE


class FakeLogManager:
    def __init__(self) -> None:
        self.logs_: dict[tuple[str, int], FakeLog] = {}
        self.deleted: list[str] = []
        self.on_offline: Any = None

    def get(self, topic: str, partition: int) -> FakeLog | None:
        return self.logs_.get((topic, partition))

    def create_partition(self, topic: str, partition: int, overrides: Any = None) -> FakeLog:
        return self.logs_.setdefault((topic, partition), FakeLog(topic, partition))

    def delete_topic(self, topic: str) -> None:
        self.deleted.append(topic)

    def logs(self) -> Any:
        return iter(self.logs_.values())

    def offline_logs(self) -> list[Any]:
        return []

    def take_offline(self, topic: str, partition: int, exc: BaseException) -> Any:
        return None

    def delete_partition(self, topic: str, partition: int) -> None:
        self.logs_.pop((topic, partition), None)

    def check_writable(self) -> None:
        pass


def test_replica_manager_topics() -> None:
    lm = FakeLogManager()
    lm.create_partition("old", 0)
    rm = ReplicaManager(lm, broker_id=0)
    assert rm.load_from_logs() == 1
    rm.create_topic("t", 3)
    assert rm.topics() == {"old": 1, "t": 3}
    with pytest.raises(KafkaError) as e:
        rm.create_topic("t", 1)
    assert e.value.code is ErrorCode.TOPIC_ALREADY_EXISTS
    rm.add_partitions("t", 5)
    assert [p.index for p in rm.partitions_of("t")] == [0, 1, 2, 3, 4]
    tid = rm.topic_id("t")
    assert tid.int != 0 and rm.topic_by_id(tid) == "t"
    rm.delete_topic("t")
    assert lm.deleted == ["t"] and rm.get("t", 0) is None
    assert rm.topic_by_id(tid) is None


def test_topic_ids_live_in_partition_metadata_files() -> None:
    """KIP-516 standalone: create_topic gives the topic an id written into every partition directory
    (Kafka's partition.metadata format), new partitions get the same id, and a new ReplicaManager over
    the same directories (a restart) reads it back; a topic from before ids gets one on first ask."""
    lm = FakeLogManager()
    rm = ReplicaManager(lm, broker_id=0)
    rm.create_topic("t", 2)
    rm.add_partitions("t", 3)
    tid = rm.topic_id("t")
    for i in range(3):
        text = (lm.create_partition("t", i).directory / "partition.metadata").read_text()
        assert text.startswith("version: 0\ntopic_id: ")
    restarted = ReplicaManager(lm, broker_id=0)
    assert restarted.load_from_logs() == 3
    assert restarted.topic_by_id(tid) == "t" and restarted.topic_id("t") == tid
    lm.create_partition("legacy", 0)
    fresh = ReplicaManager(lm, broker_id=0)
    fresh.load_from_logs()
    legacy = fresh.topic_id("legacy")
    assert legacy.int != 0 and legacy != tid
    assert ReplicaManager(lm, broker_id=0).topic_id("missing") == uuid.UUID(int=0)


def test_a_partition_without_a_replica_here_answers_as_kafka() -> None:
    """Kafka's getPartitionOrError: the cluster has it -> NOT_LEADER_OR_FOLLOWER (clients refresh metadata
    and go to the leader); unknown -> UNKNOWN_TOPIC_OR_PARTITION; standalone (no cluster view) unknown."""
    rm = ReplicaManager(FakeLogManager(), broker_id=0)
    assert rm.missing_error("t", 0) is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    rm.cluster_has = lambda t, p: (t, p) == ("t", 0)
    assert rm.missing_error("t", 0) is ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert rm.missing_error("t", 1) is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    for tp, code in (
        (("t", 0), ErrorCode.NOT_LEADER_OR_FOLLOWER),
        (("u", 0), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    ):
        with pytest.raises(KafkaError) as e:
            rm.get_or_raise(*tp)
        assert e.value.code is code
