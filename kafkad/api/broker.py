"""The broker's shared state handed to every handler: config, storage, partitions, identity, the control
plane (cluster/control_plane.py: local standalone, ZooKeeper in a cluster, chosen once at start) and the
services, each a typed field.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kafkad.clock import Clock
from kafkad.cluster.control_plane import ControlPlane
from kafkad.cluster.local import LocalControlPlane
from kafkad.cluster.producer_ids import ProducerIds
from kafkad.config.broker_config import BrokerConfig
from kafkad.config.defs import ListenerSpec
from kafkad.replication.fetch_session import FetchSessionCache
from kafkad.replication.manager import ReplicaManager

if TYPE_CHECKING:
    from kafkad.cluster.replication_service import ReplicationService
    from kafkad.config.dynamic import DynamicBrokerConfig
    from kafkad.coordinator.group.group_coordinator import GroupCoordinator
    from kafkad.coordinator.group.log_store import LogGroupStore
    from kafkad.coordinator.group.ownership import GroupOwnership
    from kafkad.coordinator.transaction.coordinator import TransactionCoordinator
    from kafkad.coordinator.transaction.log_store import TxnLogStore
    from kafkad.coordinator.transaction.markers import BrokerMarkerSender
    from kafkad.replication.partition import Partition
    from kafkad.replication.txn_verify import TxnVerifier
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
    producer_ids: ProducerIds  # local files standalone, ZooKeeper blocks in a cluster (chosen at start)
    broker_id: int
    cluster_id: str
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
    # the transaction coordinator (coordinator/transaction/service.py starts and stops them together):
    # its __transaction_state store, marker sender and timers, and the KIP-890 check Produce asks
    txn_coordinator: TransactionCoordinator | None = None
    txn_store: TxnLogStore | None = None
    txn_markers: BrokerMarkerSender | None = None
    txn_verifier: TxnVerifier | None = None  # None: Produce accepts (no coordinator wired in)
    txn_timers: list[asyncio.Task[None]] = field(default_factory=list)
    # KIP-227's incremental fetch sessions, max.incremental.fetch.session.cache.slots (made with the Broker)
    fetch_sessions: FetchSessionCache = None  # type: ignore[assignment]
    # replica.selector.class (KIP-392): (partition, client rack) -> the replica a consumer should read
    replica_selector: Callable[[Partition, str], int] | None = None
    # None: a cluster of one (LocalControlPlane over `replicas`); service/main.py passes the ZooKeeper one
    control_plane: ControlPlane = None  # type: ignore[assignment]

    def __post_init__(self) -> None:
        if self.control_plane is None:
            self.control_plane = LocalControlPlane(self.replicas)
        if self.fetch_sessions is None:
            slots = self.config.get("max.incremental.fetch.session.cache.slots")
            self.fetch_sessions = FetchSessionCache(int(slots))  # type: ignore[arg-type]

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
