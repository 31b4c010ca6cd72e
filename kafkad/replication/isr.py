"""The leader's view of a partition's state znode, and how the leader changes its ISR.

`LeaderAndIsr` mirrors /brokers/topics/<t>/partitions/<p>/state (zookeeper-layout.md): leader, leader_epoch,
isr, controller_epoch, and the znode's zkVersion (Kafka's partition epoch). The leader of a partition shrinks
or expands its ISR through an `IsrUpdater` (Kafka <= 2.6: the leader writes the znode itself, conditional on
the zkVersion it knows, and records an /isr_change_notification so the controller propagates the change).
The election engineer's `cluster/isr_writer.py` implements it; unit tests use an in-memory fake.
"""

from __future__ import annotations

from typing import NamedTuple, Protocol


class LeaderAndIsr(NamedTuple):
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    zk_version: int


class IsrUpdater(Protocol):
    async def update_isr(self, topic: str, partition: int, new: LeaderAndIsr) -> int | None:
        """Conditional write of the partition state znode on `new.zk_version` (the version the leader
        last saw); returns the znode's new zkVersion, or None when fenced (the version moved: the controller
        changed the state; the leader then waits for its next LeaderAndIsr). Also records an
        /isr_change_notification. May raise ConnectionError when ZooKeeper is unreachable (retried later)."""
        ...
