"""ReplicaManager: the partitions this broker hosts, each a Partition over a storage log.

Standalone, every local log is led by this broker with epoch 0. Creating, growing and deleting topics
goes through the LogManager (which owns directories and overrides); this object keeps the Partition
wrappers in step and wakes waiters of partitions that go away.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Protocol

from kafkad.protocol.errors import ErrorCode, KafkaError
from kafkad.replication.partition import Partition


class LogManagerLike(Protocol):
    def get(self, topic: str, partition: int) -> Any: ...
    def create_partition(
        self, topic: str, partition: int, overrides: Mapping[str, str] | None = None
    ) -> Any: ...
    def delete_topic(self, topic: str) -> None: ...
    def logs(self) -> Iterator[Any]: ...
    def check_writable(self) -> None: ...


class ReplicaManager:
    """Runs on the event loop."""

    def __init__(self, log_manager: LogManagerLike, broker_id: int) -> None:
        self.log_manager = log_manager
        self.broker_id = broker_id
        self._partitions: dict[tuple[str, int], Partition] = {}

    def load_from_logs(self) -> int:
        """Wrap every loaded log (after LogManager.load) as a leader partition."""
        for plog in self.log_manager.logs():
            key = (plog.topic, plog.partition)
            if key not in self._partitions:
                self._partitions[key] = Partition(plog, self.broker_id)
        return len(self._partitions)

    def get(self, topic: str, partition: int) -> Partition | None:
        return self._partitions.get((topic, partition))

    def get_or_raise(self, topic: str, partition: int) -> Partition:
        p = self._partitions.get((topic, partition))
        if p is None:
            raise KafkaError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{topic}-{partition} is not on this broker"
            )
        return p

    def topics(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for topic, _ in self._partitions:
            out[topic] = out.get(topic, 0) + 1
        return out

    def partitions_of(self, topic: str) -> list[Partition]:
        return sorted((p for (t, _), p in self._partitions.items() if t == topic), key=lambda p: p.index)

    def has_topic(self, topic: str) -> bool:
        return any(t == topic for t, _ in self._partitions)

    def all_partitions(self) -> list[Partition]:
        return list(self._partitions.values())

    def create_topic(
        self, topic: str, num_partitions: int, overrides: Mapping[str, str] | None = None
    ) -> None:
        """Small filesystem work (mkdir per partition, override files)."""
        if self.has_topic(topic):
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"topic '{topic}' already exists")
        for i in range(num_partitions):
            self._add(topic, i, overrides if i == 0 else None)

    def add_partitions(self, topic: str, new_total: int) -> None:
        current = len(self.partitions_of(topic))
        for i in range(current, new_total):
            self._add(topic, i, None)

    def _add(self, topic: str, index: int, overrides: Mapping[str, str] | None) -> None:
        plog = self.log_manager.create_partition(topic, index, overrides or None)
        self._partitions[(topic, index)] = Partition(plog, self.broker_id)

    def delete_topic(self, topic: str) -> None:
        parts = self.partitions_of(topic)
        if not parts:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic '{topic}' does not exist")
        for p in parts:
            del self._partitions[(topic, p.index)]
        self.log_manager.delete_topic(topic)
        for p in parts:
            p.wake_waiters()

    def check_writable(self) -> None:
        self.log_manager.check_writable()
