"""The control plane: what a handler asks about the cluster, whatever runs it (issue 19: standalone is a
cluster of one).

One interface for topics, partitions, topic configs, elections, reassignments, the metadata image and
coordinator placement, with two implementations chosen once at start (service/main.py):
`LocalControlPlane` (cluster/local.py: `zookeeper.connect` unset, the one broker leads every partition and
is its only replica) and `ZooKeeperControlPlane` (cluster/zookeeper.py: the controller's view through the
MetadataCache, admin writes through ZooKeeper). Handlers call `broker.control_plane` and never ask which
one it is; the request checks both share live once in protocol/topic_rules.py.

The methods that answer a request take the `Broker` (its config may change at run time) and return values
the handler puts on the wire; a KafkaError they raise carries Kafka's code and message for that item.
Runs on the event loop; nothing here blocks.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from kafkad.protocol import ErrorCode

if TYPE_CHECKING:
    from kafkad.api.broker import Broker
    from kafkad.network.registry import RequestContext
    from kafkad.replication.metadata_cache import MetadataCache

TP = tuple[str, int]
ZERO_ID = uuid.UUID(int=0)
PREFERRED, UNCLEAN = 0, 1  # ElectLeaders' election types


class TopicCreated(NamedTuple):
    """CreateTopics v5+/v7+'s answer for a created (or validated) topic; the zero id and -1 where the
    controller decides after the answer (the wire's defaults)."""

    topic_id: uuid.UUID
    num_partitions: int
    replication_factor: int


class Reassignment(NamedTuple):
    replicas: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]


class ControlPlane(Protocol):
    # --- the metadata image and coordinator placement ------------------------------------------------
    async def metadata(self, ctx: RequestContext, body: Mapping[str, Any]) -> dict[str, Any]:
        """Metadata's brokers, cluster id, controller and topics (auto-creating as Kafka does); the
        handler adds topic ids and authorized operations."""
        ...

    async def find_coordinator(self, ctx: RequestContext, key: str) -> Mapping[str, Any]:
        """FindCoordinator's answer for one group (raises KafkaError COORDINATOR_NOT_AVAILABLE)."""
        ...

    async def find_transaction_coordinator(self, ctx: RequestContext, key: str) -> tuple[int, str, int]:
        """(node id, host, port) of transactional id `key`'s coordinator (KafkaError until there is one)."""
        ...

    async def describe_cluster(self, ctx: RequestContext) -> tuple[int, list[dict[str, Any]]]:
        """DescribeCluster's controller id and live brokers."""
        ...

    @property
    def image_ready(self) -> bool:
        """Whether the metadata image is known (False on a cluster broker before the controller's first
        UpdateMetadata)."""
        ...

    async def wait_image(self) -> bool:
        """Until the image is known (bounded); whether it is."""
        ...

    def topic_id(self, topic: str) -> uuid.UUID: ...

    def topic_name(self, tid: uuid.UUID) -> str | None:
        """The topic with id `tid`, or None (the zero id names no topic)."""
        ...

    def has_partition(self, topic: str, partition: int) -> bool:
        """Whether the cluster has the partition, replicated here or not (Kafka's metadata cache)."""
        ...

    def partition_count(self, topic: str) -> int:
        """How many partitions the image has of `topic` (0: none)."""
        ...

    def partition_leader(self, topic: str, partition: int) -> int | None:
        """The partition's leader in the image: a broker id, -1 while it has none, None when the image
        does not have the partition."""
        ...

    def live_broker_count(self) -> int:
        """How many brokers the image has alive (this one included)."""
        ...

    def broker_endpoint(self, broker_id: int, listener: str | None) -> tuple[str, int] | None:
        """(host, port) of another live broker on `listener` (its first listener if it has not that
        one; None = the first), for a channel to it; None when it is not alive. The local plane knows no
        other broker."""
        ...

    def group_partition_count(self, broker: Broker) -> int:
        """The __consumer_offsets partition count a group id hashes over (GroupCoordinator.partitionFor):
        the image's in a cluster (else offsets.topic.num.partitions, or the group store's count), the
        group store's on a cluster of one (the configured count, or an existing topic's holding data)."""
        ...

    # --- topics ---------------------------------------------------------------------------------------
    async def create_topic(
        self,
        broker: Broker,
        name: str,
        num_partitions: int,
        replication_factor: int,
        assignments: Mapping[int, Sequence[int]] | None,
        configs: Mapping[str, str],
        validate_only: bool,
    ) -> TopicCreated: ...

    async def create_partitions(
        self,
        broker: Broker,
        name: str,
        count: int,
        assignments: Sequence[Sequence[int]] | None,
        validate_only: bool,
        timeout_ms: int,
    ) -> None: ...

    async def delete_topics(
        self, broker: Broker, names: Sequence[str], timeout_ms: int, *, with_ids: bool
    ) -> list[tuple[ErrorCode, uuid.UUID]]:
        """Each (legal) name's error code and, where known, its id (DeleteTopics v6), in order."""
        ...

    # --- topic configs --------------------------------------------------------------------------------
    async def topic_configs(self, broker: Broker, topic: str) -> dict[str, str]:
        """The topic's overrides (UNKNOWN_TOPIC_OR_PARTITION for a topic the cluster does not have)."""
        ...

    async def alter_topic_configs(
        self, broker: Broker, topic: str, configs: Mapping[str, str | None], validate_only: bool
    ) -> None:
        """Replace the topic's overrides (None values dropped), validated whole."""
        ...

    # --- elections and reassignments ------------------------------------------------------------------
    async def elect_leaders(
        self, broker: Broker, election_type: int, partitions: list[TP] | None
    ) -> tuple[dict[TP, ErrorCode], dict[TP, str]]:
        """Each partition's result and the messages of the failed ones."""
        ...

    async def alter_reassignments(
        self, broker: Broker, moves: Mapping[TP, list[int] | None]
    ) -> dict[TP, tuple[ErrorCode, str]]: ...

    async def list_reassignments(self, partitions: list[TP] | None) -> dict[TP, Reassignment]: ...

    # --- the controller's requests to this broker ----------------------------------------------------
    def controller_cache(self, body: Mapping[str, Any]) -> MetadataCache:
        """The cache LeaderAndIsr / UpdateMetadata / StopReplica update, after the broker-epoch fence
        (KafkaError: INVALID_REQUEST standalone, STALE_BROKER_EPOCH)."""
        ...

    async def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> list[TP]:
        """The partitions `broker_id` still leads once the controller moved what it could (KafkaError
        NOT_CONTROLLER where no controller runs)."""
        ...
