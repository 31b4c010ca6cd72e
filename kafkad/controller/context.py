"""ControllerContext: what the active controller knows (Kafka's ControllerContext).

Built from ZooKeeper on failover and changed only by the controller's event processing (one event at a
time), so it needs no locks. Partition states hold the last leader/ISR written (with the znode's zkVersion,
the partition epoch); the two state machines' current states live here too.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from kafkad.controller.state_machines import PartitionStateName, ReplicaStateName
from kafkad.zk.znodes import BrokerInfo, PartitionState

TP = tuple[str, int]


@dataclass
class ControllerContext:
    epoch: int = 0
    epoch_zk_version: int = -1
    live_brokers: dict[int, BrokerInfo] = field(default_factory=dict)
    shutting_down: set[int] = field(default_factory=set)
    assignment: dict[TP, tuple[int, ...]] = field(default_factory=dict)
    topic_ids: dict[str, str] = field(default_factory=dict)
    leaders: dict[TP, PartitionState] = field(default_factory=dict)
    partition_states: dict[TP, PartitionStateName] = field(default_factory=dict)
    replica_states: dict[tuple[TP, int], ReplicaStateName] = field(default_factory=dict)
    topics_to_delete: set[str] = field(default_factory=set)
    # replicas on live brokers whose log went offline (KAFKA_STORAGE_ERROR in a LeaderAndIsr answer):
    # Kafka's replicasOnOfflineDirs, cleared when the broker registers again
    replicas_on_offline_dirs: dict[int, set[TP]] = field(default_factory=dict)
    # reassignments in flight: partition -> (target replicas, adding, removing)
    reassigning: dict[TP, tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]] = field(
        default_factory=dict
    )

    # --- brokers ---------------------------------------------------------------------------------
    @property
    def live_ids(self) -> set[int]:
        return set(self.live_brokers)

    def is_live(self, broker_id: int) -> bool:
        return broker_id in self.live_brokers

    def broker_epoch(self, broker_id: int) -> int:
        b = self.live_brokers.get(broker_id)
        return b.epoch if b is not None else -1

    # --- topics / partitions -----------------------------------------------------------------------
    def topics(self) -> set[str]:
        return {t for t, _ in self.assignment}

    def partitions_of(self, topic: str) -> list[TP]:
        return sorted(tp for tp in self.assignment if tp[0] == topic)

    def add_topic(self, topic: str, partitions: dict[int, tuple[int, ...]], topic_id: str | None) -> None:
        for p, reps in partitions.items():
            self.assignment[(topic, p)] = tuple(reps)
        if topic_id:
            self.topic_ids[topic] = topic_id

    def remove_topic(self, topic: str) -> None:
        for tp in self.partitions_of(topic):
            self.assignment.pop(tp, None)
            self.leaders.pop(tp, None)
            self.partition_states.pop(tp, None)
            self.reassigning.pop(tp, None)
        for key in [k for k in self.replica_states if k[0][0] == topic]:
            del self.replica_states[key]
        self.topic_ids.pop(topic, None)
        self.topics_to_delete.discard(topic)

    def partitions_on(self, broker_id: int) -> list[TP]:
        return [tp for tp, reps in self.assignment.items() if broker_id in reps]

    def offline_replicas(self, tp: TP) -> list[int]:
        return [b for b in self.assignment.get(tp, ()) if not self.is_replica_online(tp, b)]

    def is_replica_online(self, tp: TP, broker_id: int) -> bool:
        return broker_id in self.live_brokers and tp not in self.replicas_on_offline_dirs.get(broker_id, ())

    def dir_offline(self, tp: TP) -> set[int]:
        """Live brokers whose replica of `tp` is on an offline log dir (never leader, never in the ISR)."""
        return {b for b, tps in self.replicas_on_offline_dirs.items() if tp in tps}

    def replicas_of(self, tps: Iterable[TP]) -> Iterator[tuple[TP, int]]:
        for tp in tps:
            for b in self.assignment.get(tp, ()):
                yield tp, b

    def partition_state(self, tp: TP) -> PartitionStateName:
        return self.partition_states.get(tp, PartitionStateName.NON_EXISTENT)

    def replica_state(self, tp: TP, broker_id: int) -> ReplicaStateName:
        return self.replica_states.get((tp, broker_id), ReplicaStateName.NON_EXISTENT)

    def reset(self) -> None:
        """On resignation: forget everything (the next controller rebuilds from ZooKeeper)."""
        self.__init__()  # type: ignore[misc]
