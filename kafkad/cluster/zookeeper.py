"""The ZooKeeper control plane: a broker of a ZooKeeper-mode cluster (`zookeeper.connect` set).

The metadata image is the MetadataCache the controller's UpdateMetadata fills (answers in
cluster/metadata.py); topic, partition and config changes are ZooKeeper writes by the ClusterAdmin
(controller/admin.py) that the controller then carries out; elections and reassignments go to the
controller when it runs here (NOT_CONTROLLER elsewhere, as Kafka). Producer ids come in blocks from
/latest_producer_id_block. `ClusterMode` (cluster/zk_mode.py) registers the broker and starts the admin and
the controller once the listeners are bound: until then admin requests answer the retriable
REQUEST_TIMED_OUT.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from kafkad.cluster import metadata as cluster_metadata
from kafkad.cluster.control_plane import TP, ZERO_ID, Reassignment, TopicCreated
from kafkad.controller.admin import ClusterAdmin, ZkProducerIds
from kafkad.network.dispatcher import CloseConnection
from kafkad.protocol import ErrorCode, KafkaError
from kafkad.replication.metadata_cache import MetadataCache

if TYPE_CHECKING:
    from kafkad.api.broker import Broker
    from kafkad.cluster.zk_mode import ClusterMode
    from kafkad.network.registry import RequestContext


class ZooKeeperControlPlane:
    def __init__(self, mode: ClusterMode, broker_id: int) -> None:
        self.mode = mode
        self.cache = MetadataCache(broker_id)
        self.producer_ids = ZkProducerIds(mode.zk, broker_id)
        # the alive-broker count last warned about when __consumer_offsets could not be created yet
        self.offsets_refused_alive: int | None = None

    @property
    def admin_or_none(self) -> ClusterAdmin | None:
        return self.mode.admin

    @property
    def admin(self) -> ClusterAdmin:
        admin = self.mode.admin
        if admin is None:  # between the listeners opening and the registration in ZooKeeper
            raise KafkaError(
                ErrorCode.REQUEST_TIMED_OUT, "the broker is still registering in ZooKeeper; retry"
            )
        return admin

    def topic_overrides(self, topic: str) -> dict[str, str] | None:
        """/config/topics as last seen, for the logs LeaderAndIsr creates (None before the admin runs)."""
        admin = self.mode.admin
        return admin.topic_overrides(topic) if admin is not None else None

    # --- the metadata image and coordinator placement ------------------------------------------------
    async def metadata(self, ctx: RequestContext, body: Mapping[str, Any]) -> dict[str, Any]:
        return await cluster_metadata.metadata(ctx, self, body)

    async def find_coordinator(self, ctx: RequestContext, key: str) -> Mapping[str, Any]:
        return await cluster_metadata.find_coordinator(ctx, self, key)

    async def find_transaction_coordinator(self, ctx: RequestContext, key: str) -> tuple[int, str, int]:
        from kafkad.coordinator.transaction import service as txn_service

        return await txn_service.find_coordinator(ctx.broker, ctx.listener, key)

    async def describe_cluster(self, ctx: RequestContext) -> tuple[int, list[dict[str, Any]]]:
        """Waits for the controller's first UpdateMetadata as Metadata does, rather than naming this broker
        the whole cluster and its controller; if it does not come the connection is closed, so the client
        asks another broker."""
        cache = self.cache
        wait_s = cluster_metadata.CACHE_WAIT_S
        if not cache.initialized and not await cache.wait_initialized(wait_s):
            raise CloseConnection(f"no metadata from the controller within {wait_s:.0f} s")
        brokers = []
        for b in cache.brokers():
            ep = b.endpoint(ctx.listener)
            if ep is not None:
                brokers.append({"broker_id": b.id, "host": ep.host, "port": ep.port, "rack": b.rack})
        return cache.controller_id, brokers

    @property
    def image_ready(self) -> bool:
        return self.cache.initialized

    async def wait_image(self) -> bool:
        return await self.cache.wait_initialized(cluster_metadata.CACHE_WAIT_S)

    def topic_id(self, topic: str) -> uuid.UUID:
        return self.cache.topic_id(topic)

    def topic_name(self, tid: uuid.UUID) -> str | None:
        if tid.int == 0:
            return None
        return self.cache.topic_by_id(tid)

    def has_partition(self, topic: str, partition: int) -> bool:
        return self.cache.partition(topic, partition) is not None

    def partition_count(self, topic: str) -> int:
        return len(self.cache.partitions(topic))

    def partition_leader(self, topic: str, partition: int) -> int | None:
        state = self.cache.partition(topic, partition)
        return state.leader if state is not None else None

    def live_broker_count(self) -> int:
        return len(self.cache.brokers())

    def broker_endpoint(self, broker_id: int, listener: str | None) -> tuple[str, int] | None:
        info = self.cache.broker(broker_id)
        ep = (info.endpoint(listener) or info.endpoint()) if info is not None else None
        return (ep.host, ep.port) if ep is not None else None

    def group_partition_count(self, broker: Broker) -> int:
        from kafkad.coordinator.group.config import OFFSETS_TOPIC

        n = len(self.cache.partitions(OFFSETS_TOPIC))
        if not n:
            store = broker.group_store
            n = (
                store.num_partitions
                if store is not None
                else broker.config.group.offsets_topic_num_partitions
            )
        return n

    # --- topics: written to ZooKeeper, carried out by the controller ----------------------------------
    async def create_topic(
        self,
        broker: Broker,
        name: str,
        num_partitions: int,
        replication_factor: int,
        assignments: Mapping[int, Sequence[int]] | None,
        configs: Mapping[str, str],
        validate_only: bool,
    ) -> TopicCreated:
        await self.admin.create_topics(
            name, num_partitions, replication_factor, assignments, configs, validate_only
        )
        return TopicCreated(ZERO_ID, -1, -1)  # the controller creates it after the answer

    async def create_partitions(
        self,
        broker: Broker,
        name: str,
        count: int,
        assignments: Sequence[Sequence[int]] | None,
        validate_only: bool,
        timeout_ms: int,
    ) -> None:
        await self.admin.create_partitions(name, count, assignments, validate_only, timeout_ms)

    async def delete_topics(
        self, broker: Broker, names: Sequence[str], timeout_ms: int, *, with_ids: bool
    ) -> list[tuple[ErrorCode, uuid.UUID]]:
        """Marked in /admin/delete_topics; the controller deletes (waits up to timeout_ms)."""
        codes = await self.admin.delete_topics(names, timeout_ms / 1000)
        return [(codes[n], ZERO_ID) for n in names]

    # --- topic configs: /config/topics + a /config/changes notification every broker applies ---------
    async def topic_configs(self, broker: Broker, topic: str) -> dict[str, str]:
        """ZooKeeper's /config/topics/<topic>: the cluster's answer on any broker, hosting a replica or
        not, as Kafka's ConfigHelper reads them."""
        admin = self.admin
        if not await admin.topic_exists(topic):
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {topic} does not exist")
        return await admin.read_topic_configs(topic)

    async def alter_topic_configs(
        self, broker: Broker, topic: str, configs: Mapping[str, str | None], validate_only: bool
    ) -> None:
        await self.admin.alter_topic_configs(topic, configs, validate_only)

    # --- elections and reassignments: the controller's work -------------------------------------------
    async def elect_leaders(
        self, broker: Broker, election_type: int, partitions: list[TP] | None
    ) -> tuple[dict[TP, ErrorCode], dict[TP, str]]:
        return dict(await self.admin.elect_leaders(election_type, partitions)), {}

    async def alter_reassignments(
        self, broker: Broker, moves: Mapping[TP, list[int] | None]
    ) -> dict[TP, tuple[ErrorCode, str]]:
        codes = await self.admin.alter_reassignments(dict(moves))
        return {tp: (codes.get(tp, ErrorCode.NONE), "") for tp in moves}

    async def list_reassignments(self, partitions: list[TP] | None) -> dict[TP, Reassignment]:
        ongoing = await self.admin.list_reassignments(partitions)
        return {tp: Reassignment(*r) for tp, r in ongoing.items()}

    # --- the controller's requests to this broker ----------------------------------------------------
    def controller_cache(self, body: Mapping[str, Any]) -> MetadataCache:
        """Kafka's broker-epoch fence (KIP-380): a request stamped with a broker epoch older than this
        broker's registration was meant for an earlier incarnation; -1 (old versions) is not checked."""
        cache = self.cache
        epoch = body.get("broker_epoch", -1)
        if epoch != -1 and epoch < cache.broker_epoch:
            raise KafkaError(
                ErrorCode.STALE_BROKER_EPOCH,
                f"broker epoch {epoch} is older than ours ({cache.broker_epoch})",
            )
        return cache

    async def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> list[TP]:
        controller = self.mode.controller
        if controller is None:
            raise KafkaError(ErrorCode.NOT_CONTROLLER)
        return list(await controller.controlled_shutdown(broker_id, broker_epoch))
