"""What this broker knows of the cluster (cluster mode): the controller's UpdateMetadata, kept whole.

Kafka's ZkMetadataCache: live brokers with their endpoints and rack, the state of every partition (leader,
leader epoch, ISR, replicas, offline replicas, zkVersion), the controller id and epoch it last accepted, and
this broker's own broker epoch (the czxid of its /brokers/ids/<id> registration, set by cluster_mode). Metadata
and FindCoordinator answer from it in cluster mode; LeaderAndIsr's live_leaders and UpdateMetadata fill it.

Until the controller's first UpdateMetadata (a broker just started, or restarted while its previous
ZooKeeper session still held its registration) the cache knows nothing: no live broker, no topic.
`initialized` tells, `wait_initialized` waits for it (bounded): an answer from the empty cache would tell
clients the cluster has no brokers and their topics do not exist, and librdkafka 2.x then purges every
broker it knew and fails the topic (a producer stuck for good, chaos bug 3).

Runs on the event loop; every method is O(changes) or O(answer), never blocks.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

# security_protocol codes on the wire (Kafka's SecurityProtocol ids)
PLAINTEXT = 0


class Endpoint(NamedTuple):
    host: str
    port: int
    listener: str
    security_protocol: int


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    id: int
    endpoints: tuple[Endpoint, ...]
    rack: str | None = None

    def endpoint(self, listener: str | None = None) -> Endpoint | None:
        """The endpoint on `listener` (None: the first one)."""
        for ep in self.endpoints:
            if listener is None or ep.listener == listener:
                return ep
        return None


class PartitionState(NamedTuple):
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    replicas: tuple[int, ...]
    offline_replicas: tuple[int, ...]
    zk_version: int
    controller_epoch: int


def partition_state_from_wire(ps: Mapping[str, Any]) -> PartitionState:
    """An UpdateMetadata / LeaderAndIsr partition state dict as a PartitionState."""
    return PartitionState(
        leader=ps["leader"],
        leader_epoch=ps["leader_epoch"],
        isr=tuple(ps["isr"]),
        replicas=tuple(ps["replicas"]),
        offline_replicas=tuple(ps.get("offline_replicas") or ()),
        zk_version=ps.get("zk_version", ps.get("partition_epoch", 0)),
        controller_epoch=ps["controller_epoch"],
    )


def broker_from_wire(b: Mapping[str, Any]) -> BrokerInfo:
    """An UpdateMetadata live_brokers entry (any version) as a BrokerInfo."""
    eps = tuple(
        Endpoint(e["host"], e["port"], e.get("listener") or "PLAINTEXT", e.get("security_protocol", 0))
        for e in b.get("endpoints") or ()
    )
    if not eps and b.get("v0_host"):
        eps = (Endpoint(b["v0_host"], b["v0_port"], "PLAINTEXT", PLAINTEXT),)
    return BrokerInfo(b["id"], eps, b.get("rack"))


class MetadataCache:
    """The cluster as the controller last described it to this broker."""

    def __init__(self, broker_id: int) -> None:
        self.broker_id = broker_id
        self.broker_epoch = -1  # set by cluster_mode after registration
        self.controller_id = -1
        self.controller_epoch = -1
        self._brokers: dict[int, BrokerInfo] = {}
        self._topics: dict[str, dict[int, PartitionState]] = {}
        # KIP-516: the topic ids UpdateMetadata v7+ carries (the topic znodes' topic_id).
        self._topic_ids: dict[str, uuid.UUID] = {}
        self._initialized = asyncio.Event()  # set by the first UpdateMetadata
        # Bumped by every change below: what was built from the cache before (the Metadata answer's
        # per-topic partition lists, cluster/metadata.py) is stale once it moved.
        self.generation = 0

    @property
    def initialized(self) -> bool:
        """True once an UpdateMetadata from a controller filled the cache."""
        return self._initialized.is_set()

    async def wait_initialized(self, timeout_s: float) -> bool:
        """Wait at most `timeout_s` for the first UpdateMetadata; True if the cache is filled."""
        if not self._initialized.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._initialized.wait(), timeout_s)
        return self._initialized.is_set()

    # --- updates (UpdateMetadata) --------------------------------------------------------------------
    def update(
        self,
        controller_id: int,
        controller_epoch: int,
        live_brokers: Iterable[BrokerInfo],
        partitions: Iterable[tuple[str, int, PartitionState]],
    ) -> list[tuple[str, int]]:
        """Apply one UpdateMetadata (fencing is the caller's); returns the partitions deleted (leader -2)."""
        self.generation += 1
        self.controller_id = controller_id
        self.controller_epoch = max(self.controller_epoch, controller_epoch)
        self._brokers = {b.id: b for b in live_brokers}
        self._initialized.set()
        deleted: list[tuple[str, int]] = []
        for topic, index, state in partitions:
            if state.leader == LEADER_DURING_DELETE:
                parts = self._topics.get(topic)
                if parts is not None:
                    parts.pop(index, None)
                    if not parts:
                        del self._topics[topic]
                deleted.append((topic, index))
            else:
                self._topics.setdefault(topic, {})[index] = state
        return deleted

    def set_topic_id(self, topic: str, topic_id: uuid.UUID) -> None:
        if topic_id.int != 0:
            self._topic_ids[topic] = topic_id

    def topic_id(self, topic: str) -> uuid.UUID:
        """The topic's id (the zero UUID if unknown, or the topic is gone)."""
        tid = self._topic_ids.get(topic) if topic in self._topics else None
        return tid if tid is not None else uuid.UUID(int=0)

    def topic_by_id(self, topic_id: uuid.UUID) -> str | None:
        return next((t for t, i in self._topic_ids.items() if i == topic_id and t in self._topics), None)

    def set_partition(self, topic: str, index: int, state: PartitionState) -> None:
        self.generation += 1
        self._topics.setdefault(topic, {})[index] = state

    def remove_topic(self, topic: str) -> None:
        self.generation += 1
        self._topics.pop(topic, None)

    # --- queries ---------------------------------------------------------------------------------------
    def brokers(self) -> list[BrokerInfo]:
        return sorted(self._brokers.values(), key=lambda b: b.id)

    def broker(self, broker_id: int) -> BrokerInfo | None:
        return self._brokers.get(broker_id)

    def is_alive(self, broker_id: int) -> bool:
        return broker_id in self._brokers

    def topics(self) -> dict[str, int]:
        """Topic -> partition count."""
        return {t: len(p) for t, p in self._topics.items()}

    def has_topic(self, topic: str) -> bool:
        return topic in self._topics

    def partitions(self, topic: str) -> Mapping[int, PartitionState]:
        return self._topics.get(topic, {})

    def partition(self, topic: str, index: int) -> PartitionState | None:
        parts = self._topics.get(topic)
        return None if parts is None else parts.get(index)

    def all_partitions(self) -> Iterator[tuple[str, int, PartitionState]]:
        for topic, parts in self._topics.items():
            for index, state in parts.items():
                yield topic, index, state

    def leader_endpoint(self, topic: str, index: int, listener: str | None = None) -> Endpoint | None:
        """Where the partition's leader listens, if it is alive and known."""
        state = self.partition(topic, index)
        if state is None or state.leader < 0:
            return None
        b = self._brokers.get(state.leader)
        return None if b is None else b.endpoint(listener)


LEADER_DURING_DELETE = -2  # Kafka's LeaderAndIsr.LeaderDuringDelete: UpdateMetadata removes the partition
