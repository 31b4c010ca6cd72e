"""Replication in a cluster-mode broker: the metadata cache, the follower fetchers, the ISR shrink timer and
the high-watermark checkpoint timer (Kafka's ReplicaManager.startup / startHighWatermarkCheckPointThread).

`start_replication(broker, cache)` runs before the listeners open, only when zookeeper.connect is set: every
loaded partition then waits for the controller's LeaderAndIsr; `cache` is the ZooKeeper control plane's
MetadataCache the controller's UpdateMetadata fills. cluster/zk_mode.py sets the cache's broker_epoch
after registration and the ReplicaManager's IsrUpdater (`replicas.set_isr_updater`). Standalone never gets
here, so nothing of this runs per request there.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kafkad.replication.fetcher import FetcherConfig, FetcherManager
from kafkad.replication.metadata_cache import MetadataCache
from kafkad.replication.partition import Partition
from kafkad.replication.replica_selector import preferred_read_replica, rack_aware

if TYPE_CHECKING:
    from kafkad.api.broker import Broker

log = logging.getLogger(__name__)


def fetcher_config(broker: Broker) -> FetcherConfig:
    c = broker.config

    def i(name: str) -> int:
        return int(c.get(name))  # type: ignore[arg-type]

    return FetcherConfig(
        broker_id=broker.broker_id,
        num_fetchers=i("num.replica.fetchers"),
        max_wait_ms=i("replica.fetch.wait.max.ms"),
        min_bytes=i("replica.fetch.min.bytes"),
        partition_max_bytes=i("replica.fetch.max.bytes"),
        response_max_bytes=i("replica.fetch.response.max.bytes"),
        backoff_ms=i("replica.fetch.backoff.ms"),
        request_timeout_ms=i("replica.socket.timeout.ms"),
        rack=c.server.rack or "",
    )


@dataclass
class ReplicationService:
    broker: Broker
    fetchers: FetcherManager
    cache: MetadataCache
    tasks: list[asyncio.Task[None]] = field(default_factory=list)

    async def stop(self) -> None:
        for t in self.tasks:
            t.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        await self.fetchers.shutdown()


async def _every(interval_ms: int, what: str, step: Callable[[], object]) -> None:
    while True:
        await asyncio.sleep(interval_ms / 1000)
        try:
            result = step()
            if asyncio.iscoroutine(result):
                await result
        except Exception:
            log.exception("periodic %s failed", what)


def _install_selector(broker: Broker, cache: MetadataCache) -> None:
    """replica.selector.class = RackAwareReplicaSelector: the Fetch handler's KIP-392 choice."""
    if not rack_aware(broker.config.get("replica.selector.class")):  # type: ignore[arg-type]
        return
    own_rack = broker.config.server.rack

    def rack_of(broker_id: int) -> str | None:
        info = cache.broker(broker_id)
        return None if info is None else info.rack

    def select(part: Partition, client_rack: str) -> int:
        return preferred_read_replica(part, client_rack, own_rack, rack_of)

    broker.replica_selector = select


async def start_replication(broker: Broker, cache: MetadataCache) -> ReplicationService:
    clock = broker.clock
    fetchers = FetcherManager(fetcher_config(broker), clock.time_ms)
    replicas = broker.replicas
    replicas.enter_cluster_mode(fetchers, clock.time_ms)
    from kafkad.coordinator.group.ownership import install

    install(broker)  # the group coordinator follows __consumer_offsets leadership
    _install_selector(broker, cache)
    service = ReplicationService(broker, fetchers, cache)
    loop = asyncio.get_running_loop()
    lag_ms = int(broker.config.get("replica.lag.time.max.ms"))  # type: ignore[arg-type]
    checkpoint_ms = int(broker.config.get("replica.high.watermark.checkpoint.interval.ms"))  # type: ignore[arg-type]

    async def checkpoint() -> None:
        await loop.run_in_executor(None, broker.log_manager.checkpoint_all)

    # Kafka checks the ISR every replica.lag.time.max.ms / 2.
    service.tasks.append(
        loop.create_task(_every(max(1, lag_ms // 2), "ISR shrink", lambda: replicas.shrink_isrs(lag_ms)))
    )
    service.tasks.append(loop.create_task(_every(checkpoint_ms, "HW checkpoint", checkpoint)))
    broker.replication = service
    log.info("cluster mode: %d partitions wait for the controller", len(replicas.all_partitions()))
    return service
