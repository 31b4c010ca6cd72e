"""The local control plane: a cluster of one broker (`zookeeper.connect` unset).

This broker is the cluster's only member and its controller: it leads every partition and is its only
replica, so the metadata image is the ReplicaManager's partitions (plus the offline ones, led by nobody),
topics are created and deleted on the local logs, their configs are the LogManager's overrides, every
partition already has its preferred leader and no reassignment can be in flight. Nothing here imports
ZooKeeper or the controller.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from kafkad.cluster.control_plane import TP, ZERO_ID, Reassignment, TopicCreated
from kafkad.protocol import ErrorCode, KafkaError
from kafkad.protocol.topic_names import INTERNAL_TOPICS, topic_name_error
from kafkad.protocol.topic_rules import (
    check_new_partition_count,
    check_partition_count,
    topic_exists,
)
from kafkad.replication.manager import ReplicaManager

if TYPE_CHECKING:
    from kafkad.api.broker import Broker
    from kafkad.network.registry import RequestContext
    from kafkad.replication.metadata_cache import MetadataCache

log = logging.getLogger(__name__)

AUTHORIZED_OPS_OMITTED = -2147483648


def unknown_topic_id(topic_id: Any) -> dict[str, Any]:
    """Metadata v10+'s answer to a topic named by an id no topic has."""
    return {
        "error_code": int(ErrorCode.UNKNOWN_TOPIC_ID),
        "name": None,
        "topic_id": topic_id,
        "is_internal": False,
        "partitions": [],
    }


class LocalControlPlane:
    def __init__(self, replicas: ReplicaManager) -> None:
        self.replicas = replicas

    # --- the metadata image and coordinator placement ------------------------------------------------
    def _topic(self, broker: Broker, name: str) -> dict[str, Any]:
        parts = self.replicas.partitions_of(name)
        partitions: list[dict[str, Any]] = [
            {
                "error_code": 0 if p.leader_id is not None else int(ErrorCode.LEADER_NOT_AVAILABLE),
                "partition_index": p.index,
                "leader_id": p.leader_id if p.leader_id is not None else -1,
                "leader_epoch": p.leader_epoch,
                "replica_nodes": list(p.replicas),
                "isr_nodes": list(p.isr),
                "offline_replicas": [],
            }
            for p in parts
        ]
        loading = self.replicas.loading_of(name)
        if loading:  # a crash's logs still loading: no leader yet (retriable), as Kafka's metadata has it
            me = [broker.broker_id]
            partitions += [
                {
                    "error_code": int(ErrorCode.LEADER_NOT_AVAILABLE),
                    "partition_index": index,
                    "leader_id": -1,
                    "leader_epoch": 0,
                    "replica_nodes": me,
                    "isr_nodes": me,
                    "offline_replicas": [],
                }
                for index in loading
            ]
        offline = self.replicas.offline_of(name)
        if offline:  # files that failed (storage/log_offline.py): Kafka's offline partition, no leader
            me = [broker.broker_id]
            partitions += [
                {
                    "error_code": int(ErrorCode.LEADER_NOT_AVAILABLE),
                    "partition_index": off.partition,
                    "leader_id": -1,
                    "leader_epoch": 0,
                    "replica_nodes": me,
                    "isr_nodes": me,
                    "offline_replicas": me,
                }
                for off in offline
            ]
        if offline or loading:
            partitions.sort(key=lambda p: p["partition_index"])
        return {
            "error_code": 0,
            "name": name,
            "is_internal": name in INTERNAL_TOPICS,
            "partitions": partitions,
            "topic_authorized_operations": AUTHORIZED_OPS_OMITTED,
        }

    async def metadata(self, ctx: RequestContext, body: Mapping[str, Any]) -> dict[str, Any]:
        """__consumer_offsets is created on demand by the group coordinator: it is not listed while half
        made, and a request naming it creates it as Kafka does for internal topics (whatever
        auto.create.topics.enable says, if the request allows auto-creation)."""
        # The group coordinator loads on the handlers' import thread, not with the Broker (service/main.py).
        from kafkad.coordinator.group.config import OFFSETS_TOPIC
        from kafkad.coordinator.group.service import hidden_topics, ready_coordinator

        broker = ctx.broker
        requested = body.get("topics")
        allow_auto = bool(body.get("allow_auto_topic_creation", True)) if ctx.version >= 4 else True
        topics: list[dict[str, Any]] = []
        hidden = hidden_topics(broker)
        if requested is None or (ctx.version == 0 and not requested):
            topics = [
                self._topic(broker, name) for name in sorted(self.replicas.topics()) if name not in hidden
            ]
        else:
            for entry in requested:
                name = entry.get("name")
                if name is None and ctx.version >= 10:  # v10+: a topic by id only
                    name = self.topic_name(entry["topic_id"])
                    if name is None or name in hidden:
                        topics.append(unknown_topic_id(entry.get("topic_id")))
                        continue
                name = name or ""
                if name == OFFSETS_TOPIC and allow_auto:
                    try:
                        await ready_coordinator(broker)
                    except KafkaError:
                        topics.append(_error_topic(name, ErrorCode.LEADER_NOT_AVAILABLE))  # retriable
                        continue
                elif name in hidden:
                    topics.append(_error_topic(name, ErrorCode.LEADER_NOT_AVAILABLE))
                    continue
                if self.replicas.has_topic(name):
                    topics.append(self._topic(broker, name))
                    continue
                if topic_name_error(name):
                    topics.append(_error_topic(name, ErrorCode.INVALID_TOPIC_EXCEPTION))
                    continue
                try:
                    created = self._maybe_auto_create(broker, name, allow_auto)
                except KafkaError as e:
                    topics.append(_error_topic(name, e.code))
                    continue
                topics.append(
                    self._topic(broker, name)
                    if created
                    else _error_topic(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                )
        host, port = broker.advertised_host_port(ctx.listener if ctx.session is not None else None)
        return {
            "throttle_time_ms": 0,
            "brokers": [
                {"node_id": broker.broker_id, "host": host, "port": port, "rack": broker.config.server.rack}
            ],
            "cluster_id": broker.cluster_id,
            "controller_id": broker.broker_id,
            "topics": topics,
        }

    def _maybe_auto_create(self, broker: Broker, name: str, allowed: bool) -> bool:
        """Create `name` with the broker defaults if auto-creation is on; True if it exists now."""
        if self.replicas.has_topic(name):
            return True
        if not (allowed and broker.config.server.auto_create_topics_enable):
            return False
        if topic_name_error(name) or name in INTERNAL_TOPICS:
            return False
        self._create(broker, name, -1, -1, {}, validate_only=False)
        return True

    async def find_coordinator(self, ctx: RequestContext, key: str) -> Mapping[str, Any]:
        """This broker coordinates every group, once __consumer_offsets exists (created by the first
        lookup; concurrent lookups wait for the same creation)."""
        from kafkad.coordinator.group.service import ready_coordinator

        broker = ctx.broker
        await ready_coordinator(broker)  # KafkaError(COORDINATOR_NOT_AVAILABLE) -> the error body
        host, port = broker.advertised_host_port(ctx.listener if ctx.session is not None else None)
        return {
            "throttle_time_ms": 0,
            "error_code": 0,
            "error_message": "NONE",  # Kafka: Errors.NONE.message()
            "node_id": broker.broker_id,
            "host": host,
            "port": port,
        }

    async def find_transaction_coordinator(self, ctx: RequestContext, key: str) -> tuple[int, str, int]:
        """This broker coordinates every transactional id, once __transaction_state exists (created by
        the first lookup)."""
        from kafkad.coordinator.transaction import service as txn_service

        listener = ctx.listener if ctx.session is not None else None
        return await txn_service.find_local_coordinator(ctx.broker, listener)

    async def describe_cluster(self, ctx: RequestContext) -> tuple[int, list[dict[str, Any]]]:
        broker = ctx.broker
        host, port = broker.advertised_host_port()
        me = {"broker_id": broker.broker_id, "host": host, "port": port, "rack": broker.config.server.rack}
        return broker.broker_id, [me]

    @property
    def image_ready(self) -> bool:
        return True

    async def wait_image(self) -> bool:
        return True

    def topic_id(self, topic: str) -> uuid.UUID:
        return self.replicas.topic_id(topic)

    def topic_name(self, tid: uuid.UUID) -> str | None:
        if tid.int == 0:
            return None
        return self.replicas.topic_by_id(tid)

    def has_partition(self, topic: str, partition: int) -> bool:
        return self.replicas.partition_known(topic, partition)

    def partition_count(self, topic: str) -> int:
        return self.replicas.topics().get(topic, 0)

    def partition_leader(self, topic: str, partition: int) -> int | None:
        part = self.replicas.get(topic, partition)
        if part is None:
            return -1 if self.replicas.is_loading(topic, partition) else None  # -1: a leader comes
        return part.leader_id if part.leader_id is not None else -1

    def live_broker_count(self) -> int:
        return 1

    def broker_endpoint(self, broker_id: int, listener: str | None) -> tuple[str, int] | None:
        return None

    def group_partition_count(self, broker: Broker) -> int:
        store = broker.group_store
        return store.num_partitions if store is not None else broker.config.group.offsets_topic_num_partitions

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
    ) -> TopicCreated:
        if assignments:
            for replicas in assignments.values():
                if list(replicas) != [broker.broker_id]:
                    raise KafkaError(
                        ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                        f"assignment {list(replicas)} names unknown brokers",
                    )
            num_partitions, replication_factor = len(assignments), 1
        n = self._create(broker, name, num_partitions, replication_factor, configs, validate_only)
        tid = ZERO_ID if validate_only else self.replicas.topic_id(name)
        return TopicCreated(tid, n, 1)

    def _create(
        self,
        broker: Broker,
        name: str,
        num_partitions: int,
        replication_factor: int,
        configs: Mapping[str, str],
        validate_only: bool,
    ) -> int:
        """Validate and (unless validate_only) create a legal name; the partition count. Raises
        KafkaError."""
        if self.replicas.has_topic(name):
            raise topic_exists(name)
        server = broker.config.server
        if num_partitions == -1:
            num_partitions = server.num_partitions
        check_partition_count(num_partitions)
        if replication_factor == -1:
            replication_factor = server.default_replication_factor
        if replication_factor != 1:
            raise KafkaError(
                ErrorCode.INVALID_REPLICATION_FACTOR,
                f"Replication factor: {replication_factor} larger than available brokers: 1.",
            )
        if configs:
            # INVALID_CONFIG with the offending key in the message
            broker.log_manager.default_log_config.with_overrides(configs)
        if validate_only:
            return num_partitions
        self.replicas.create_topic(name, num_partitions, configs)
        log.info(
            "created topic %s with %d partitions%s",
            name,
            num_partitions,
            f" {dict(configs)}" if configs else "",
        )
        return num_partitions

    async def create_partitions(
        self,
        broker: Broker,
        name: str,
        count: int,
        assignments: Sequence[Sequence[int]] | None,
        validate_only: bool,
        timeout_ms: int,
    ) -> None:
        await self.replicas.wait_loaded()  # the new partitions follow the loaded ones
        current = self.replicas.topics().get(name, 0)  # offline partitions count too
        check_new_partition_count(name, current, count, len(assignments) if assignments else None)
        if assignments and any(list(a) != [broker.broker_id] for a in assignments):
            raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "assignments name unknown brokers")
        if not validate_only:
            self.replicas.add_partitions(name, count)

    async def delete_topics(
        self, broker: Broker, names: Sequence[str], timeout_ms: int, *, with_ids: bool
    ) -> list[tuple[ErrorCode, uuid.UUID]]:
        await self.replicas.wait_loaded()  # a loading log is open on a loader thread: never delete it
        out: list[tuple[ErrorCode, uuid.UUID]] = []
        for name in names:
            try:
                tid = self.replicas.topic_id(name) if with_ids else ZERO_ID
                self.replicas.delete_topic(name)
                out.append((ErrorCode.NONE, tid))
            except KafkaError as e:
                out.append((e.code, ZERO_ID))
        return out

    # --- topic configs --------------------------------------------------------------------------------
    async def topic_configs(self, broker: Broker, topic: str) -> dict[str, str]:
        if not self.replicas.has_topic(topic):
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {topic} does not exist")
        overrides: dict[str, str] = broker.log_manager.topic_overrides(topic)
        return overrides

    async def alter_topic_configs(
        self, broker: Broker, topic: str, configs: Mapping[str, str | None], validate_only: bool
    ) -> None:
        """A null value is INVALID_CONFIG (the ZooKeeper plane drops the key instead)."""
        if not self.replicas.has_topic(topic):
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {topic} does not exist")
        new: dict[str, str] = {}
        for k, v in configs.items():
            if v is None:
                raise KafkaError(ErrorCode.INVALID_CONFIG, f"Null value not supported for topic configs: {k}")
            new[k] = v
        lm = broker.log_manager
        lm.default_log_config.with_overrides(new)  # INVALID_CONFIG naming the key
        if not validate_only:
            await self.replicas.wait_loaded()  # every partition dir of the topic gets the file
            await asyncio.get_running_loop().run_in_executor(None, lm.set_topic_overrides, topic, new)

    # --- elections and reassignments ------------------------------------------------------------------
    async def elect_leaders(
        self, broker: Broker, election_type: int, partitions: list[TP] | None
    ) -> tuple[dict[TP, ErrorCode], dict[TP, str]]:
        """Every partition already has its preferred (and only) leader: ELECTION_NOT_NEEDED, as Kafka
        answers a partition led by its preferred replica."""
        results: dict[TP, ErrorCode] = {}
        messages: dict[TP, str] = {}
        for tp in partitions or []:
            if not self.replicas.partition_known(tp[0], tp[1]) or self.replicas.is_offline(*tp):
                results[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                messages[tp] = f"The partition {tp[0]}-{tp[1]} does not exist."
            else:
                results[tp] = ErrorCode.ELECTION_NOT_NEEDED
                messages[tp] = "Leader election not needed for topic partition."
        return results, messages

    async def alter_reassignments(
        self, broker: Broker, moves: Mapping[TP, list[int] | None]
    ) -> dict[TP, tuple[ErrorCode, str]]:
        """A target of exactly this broker is already in place (NONE, as Kafka answers a reassignment to
        the current replicas); anything else names brokers that do not exist."""
        return {tp: self._reassign(broker, tp, target) for tp, target in moves.items()}

    def _reassign(self, broker: Broker, tp: TP, target: list[int] | None) -> tuple[ErrorCode, str]:
        if self.replicas.get(tp[0], tp[1]) is None and not self.replicas.is_loading(tp[0], tp[1]):
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The partition {tp[0]}-{tp[1]} does not exist."
        if target is None:
            return ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, f"No reassignment in progress for {tp[0]}-{tp[1]}."
        me = broker.broker_id
        if not target or len(set(target)) != len(target):
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"Invalid replica assignment {target}."
        if set(target) != {me}:
            return (
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"Replica assignment {target} has brokers that are not alive (this standalone broker is {me}).",
            )
        return ErrorCode.NONE, ""

    async def list_reassignments(self, partitions: list[TP] | None) -> dict[TP, Reassignment]:
        return {}

    # --- the controller's requests to this broker ----------------------------------------------------
    def controller_cache(self, body: Mapping[str, Any]) -> MetadataCache:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "a standalone broker takes no controller requests")

    async def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> list[TP]:
        raise KafkaError(ErrorCode.NOT_CONTROLLER)


def _error_topic(name: str, code: ErrorCode) -> dict[str, Any]:
    return {"error_code": int(code), "name": name, "is_internal": False, "partitions": []}
