"""The broker's shared state handed to every handler: config, storage, partitions, identity, services.

Also the topic-level policies every admin path shares (name validation, auto-creation, defaults), so
Metadata, Produce and CreateTopics agree on them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kafkad.clock import Clock
from kafkad.cluster.producer_ids import ProducerIdManager
from kafkad.config.broker_config import BrokerConfig
from kafkad.config.defs import ListenerSpec
from kafkad.protocol.errors import ErrorCode, KafkaError
from kafkad.protocol.topic_names import INTERNAL_TOPICS, topic_name_error
from kafkad.replication.manager import ReplicaManager

if TYPE_CHECKING:
    from kafkad.cluster.replication_service import ReplicationService
    from kafkad.config.dynamic import DynamicBrokerConfig
    from kafkad.coordinator.group.group_coordinator import GroupCoordinator
    from kafkad.coordinator.group.log_store import LogGroupStore
    from kafkad.coordinator.group.ownership import GroupOwnership
    from kafkad.replication.partition import Partition
    from kafkad.security.runtime import SecurityRuntime
    from kafkad.service.bridge_service import BridgeService
    from kafkad.service.log_cleaner_task import CleanerService
    from kafkad.service.metrics import BrokerMetrics
    from kafkad.service.netlink import InterfaceAddresses

log = logging.getLogger(__name__)


@dataclass
class Broker:
    config: BrokerConfig
    clock: Clock
    log_manager: Any  # kafkad.storage.log_manager.LogManager
    replicas: ReplicaManager
    producer_ids: ProducerIdManager
    broker_id: int
    cluster_id: str
    # Services without a typed field yet (a subsystem being added): name -> object. Every service a
    # handler uses has its field below; give a new one a field when it lands.
    services: dict[str, Any] = field(default_factory=dict)
    stopping: bool = False
    # kafkad.security.acl.Authorizer when authorizer.class.name is set; None = every request allowed.
    authorizer: Any = None
    # The services, set once where they start (service/main.py and the rooms' start functions); None
    # where the configuration runs none (no metrics listener, no bridge, standalone's replication).
    security: SecurityRuntime | None = None
    metrics: BrokerMetrics | None = None
    dynamic_config: DynamicBrokerConfig | None = None
    interfaces: InterfaceAddresses | None = None  # listeners named by interface: eth0 -> its address
    cleaner: CleanerService | None = None
    bridge: BridgeService | None = None
    group_coordinator: GroupCoordinator | None = None
    group_store: LogGroupStore | None = None
    # cluster mode: which groups this broker coordinates (follows __consumer_offsets leadership)
    group_ownership: GroupOwnership | None = None
    replication: ReplicationService | None = None
    # replica.selector.class (KIP-392): (partition, client rack) -> the replica a consumer should read
    replica_selector: Callable[[Partition, str], int] | None = None

    def security_runtime(self) -> SecurityRuntime:
        """The security services (service/main.py sets them before the listeners open)."""
        assert self.security is not None
        return self.security

    @property
    def advertised(self) -> tuple[ListenerSpec, ...]:
        return self.config.server.advertised_listeners

    def advertised_spec(self, listener: str | None = None) -> ListenerSpec:
        """The advertised endpoint of `listener` (the one a request came in on: Kafka answers with the
        same listener's address); None = a PLAINTEXT connection: the first PLAINTEXT listener."""
        specs = self.advertised
        if listener is not None:
            for spec in specs:
                if spec.name == listener:
                    return spec
        protocols = self.config.security.listeners
        for spec in specs:
            ls = protocols.get(spec.name)
            if ls is None or not (ls.protocol.tls or ls.protocol.sasl):
                return spec
        return specs[0]

    def advertised_host_port(self, listener: str | None = None) -> tuple[str, int]:
        spec = self.advertised_spec(listener) if len(self.advertised) > 1 else self.advertised[0]
        host = spec.host
        interfaces = self.interfaces
        if interfaces is not None:
            host = interfaces.advertise(host)
        if host in ("", "0.0.0.0", "::"):
            import socket

            host = socket.gethostname()
        return host, spec.port

    def create_topic(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        configs: Mapping[str, str],
        *,
        validate_only: bool = False,
    ) -> None:
        """Validate and (unless validate_only) create; raises KafkaError with Kafka's codes."""
        err = topic_name_error(name)
        if err:
            raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, err)
        if self.replicas.has_topic(name):
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        if num_partitions == -1:
            num_partitions = self.config.server.num_partitions
        if num_partitions <= 0:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0.")
        if replication_factor == -1:
            replication_factor = self.config.server.default_replication_factor
        if self.config.standalone and replication_factor != 1:
            raise KafkaError(
                ErrorCode.INVALID_REPLICATION_FACTOR,
                f"Replication factor: {replication_factor} larger than available brokers: 1.",
            )
        if configs:
            # INVALID_CONFIG with the offending key in the message
            self.log_manager.default_log_config.with_overrides(configs)
        if validate_only:
            return
        self.replicas.create_topic(name, num_partitions, configs)
        log.info(
            "created topic %s with %d partitions%s",
            name,
            num_partitions,
            f" {dict(configs)}" if configs else "",
        )

    def maybe_auto_create(self, name: str, allowed: bool = True) -> bool:
        """Create `name` with the broker defaults if auto-creation is on; True if it exists now."""
        if self.replicas.has_topic(name):
            return True
        if not (allowed and self.config.server.auto_create_topics_enable):
            return False
        if topic_name_error(name) or name in INTERNAL_TOPICS:
            return False
        self.create_topic(name, -1, -1, {})
        return True
