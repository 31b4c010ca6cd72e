"""The Spark bridge's segment shipper inside the daemon (bridge.enabled=true).

Order in `main.run`: a `ShippedGate` is made first and handed to the LogManager as its `is_shipped`
(the LogManager exists before the logs are loaded, the shipper only after); `start_bridge` then builds
the `Shipper` over a `LogManagerSegmentSource` on the running loop, attaches it to the gate and starts
its worker thread. `BridgeService.close` stops the thread in an executor, before the logs close.

The gate answers "may retention / the disk budget delete this segment?": yes for topics the bridge
does not ship, otherwise only once the segment's end is at or below the partition's shipped position
(nothing is shipped before `attach`). Standalone, positions live in `bridge-shipped-offsets` in the
first log dir; in cluster mode in ZooKeeper (`zk_position.py`), and only partition leaders ship.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from kafkad.config.broker_config import BridgeConfig
from kafkad.spark_bridge.landing import open_landing
from kafkad.spark_bridge.position import LocalPositionStore, ShippedPositionStore
from kafkad.spark_bridge.segment_source import LogManagerSegmentSource
from kafkad.spark_bridge.shipper import Shipper, ShipperConfig, ShipResult

if TYPE_CHECKING:
    from kafkad.replication.manager import ReplicaManager
    from kafkad.storage.log_manager import LogManager
    from kafkad.zk.client import ZkClient

log = logging.getLogger(__name__)

MIN_POLL_MS = 100
MAX_POLL_MS = 5_000


class ShippedGate:
    """A late-bound `is_shipped(topic, partition, base_offset)` for the LogManager (any thread)."""

    __slots__ = ("_shipper",)

    def __init__(self) -> None:
        self._shipper: Shipper | None = None

    def attach(self, shipper: Shipper) -> None:
        self._shipper = shipper

    def __call__(self, topic: str, partition: int, base_offset: int) -> bool:
        shipper = self._shipper
        if shipper is None:
            return False  # not started yet: keep everything
        return not shipper.wants(topic) or shipper.is_shipped(topic, partition, base_offset)


def poll_interval_ms(max_segment_age_ms: int) -> int:
    """Passes run often enough that a segment rolled for age is shipped about as soon as it is old."""
    return max(MIN_POLL_MS, min(MAX_POLL_MS, max_segment_age_ms // 2))


@dataclass(slots=True)
class BridgeService:
    shipper: Shipper

    async def close(self) -> None:
        """Stop the worker thread (blocking join in an executor); an in-flight copy is redone later."""
        await asyncio.get_running_loop().run_in_executor(None, self.shipper.close)
        log.info(
            "bridge: stopped (%d segments, %d bytes shipped since start)",
            self.shipper.segments_shipped,
            self.shipper.bytes_shipped,
        )


def start_bridge(
    config: BridgeConfig,
    log_manager: LogManager,
    log_dirs: tuple[str, ...],
    gate: ShippedGate,
    *,
    cluster_id: str | None,
    loop: asyncio.AbstractEventLoop,
    registry: CollectorRegistry | None = None,
    status: Callable[[str], None] | None = None,
    cluster: tuple[ZkClient, ReplicaManager, int] | None = None,
) -> BridgeService:
    """Build, attach and start the shipper (call on the loop, after the logs are loaded).

    `cluster` (ZooKeeper client, replica manager, broker id) in cluster mode: positions in ZooKeeper,
    only leaders ship; else the positions file in the first log dir.
    """
    assert config.landing_dir is not None  # load_config rejects bridge.enabled without it
    landing = open_landing(config.landing_dir, config.s3)
    try:
        landing.check()
    except OSError as e:  # the shipper backs off and retries; say so now rather than at the first copy
        log.warning("bridge: landing %s is not reachable yet (%s); will retry", landing.uri, e)

    def on_shipped(result: ShipResult) -> None:  # worker thread
        if status is not None and result.copied:
            seg = result.segment
            text = (
                f"bridge: {shipper.segments_shipped} segments shipped, "
                f"last {seg.topic}-{seg.partition}@{seg.base_offset}"
            )
            loop.call_soon_threadsafe(status, text)

    site = config.site or cluster_id
    if site is None:
        raise ValueError("bridge: no bridge.site and no cluster id to name the site by")
    shipper = Shipper(
        ShipperConfig(
            site=site,
            cluster_id=cluster_id,
            topics=config.topics,
            rate_limit_bytes_per_sec=config.rate_limit_bytes_per_sec,
            max_segment_age_ms=config.max_segment_age_ms,
            poll_interval_ms=poll_interval_ms(config.max_segment_age_ms),
        ),
        LogManagerSegmentSource(log_manager, loop),
        landing,
        _positions(log_dirs[0], cluster, loop),
        on_shipped=on_shipped,
    )
    gate.attach(shipper)
    if registry is not None:
        registry.register(BridgeCollector(shipper, log_manager))
    shipper.start()
    rate = config.rate_limit_bytes_per_sec
    log.info(
        "bridge: shipping closed segments of topics matching %s to %s as site %s "
        "(rate limit %s, roll after %d ms)",
        " | ".join(config.topics) if config.topics else "every non-internal topic",
        landing.uri,
        site,
        f"{rate} bytes/s" if rate > 0 else "none",
        config.max_segment_age_ms,
    )
    return BridgeService(shipper)


def _positions(
    log_dir: str, cluster: tuple[ZkClient, ReplicaManager, int] | None, loop: asyncio.AbstractEventLoop
) -> ShippedPositionStore:
    if cluster is None:
        return LocalPositionStore.in_dir(log_dir)
    from kafkad.spark_bridge.zk_position import ZkPositionStore

    zk, replicas, broker_id = cluster

    def leader_epoch(topic: str, partition: int) -> int | None:  # worker thread: plain attribute reads
        p = replicas.get(topic, partition)
        return p.leader_epoch if p is not None and p.is_leader and p.leader_epoch >= 0 else None

    return ZkPositionStore(zk, loop, leader_epoch, broker_id)


class BridgeCollector(Collector):
    """Shipper progress at scrape time (plain int reads; the worker thread only increments them)."""

    def __init__(self, shipper: Shipper, log_manager: LogManager) -> None:
        self._shipper = shipper
        self._logs = log_manager

    def describe(self) -> Iterable[Metric]:
        return []

    def collect(self) -> Iterable[Metric]:
        s = self._shipper
        yield CounterMetricFamily(
            "kafkad_bridge_segments_shipped", "Segments copied to the landing area.", s.segments_shipped
        )
        yield CounterMetricFamily(
            "kafkad_bridge_bytes_shipped", "Bytes of segments copied to the landing area.", s.bytes_shipped
        )
        yield CounterMetricFamily(
            "kafkad_bridge_landing_failures", "Failed shipping attempts (retried).", s.failures
        )
        yield GaugeMetricFamily(
            "kafkad_bridge_retention_held_segments",
            "Segments retention would delete but keeps because they are not shipped yet.",
            self._logs.retention_held_segments,
        )
        yield CounterMetricFamily(
            "kafkad_bridge_unshipped_segments_deleted",
            "Unshipped segments the disk budget deleted anyway (data the bridge never saw).",
            self._logs.unshipped_deleted_total,
        )
