"""Wiring of the group coordinator into a running broker (`Broker.group_coordinator` and `Broker.group_store`).

`coordinator_for(broker)` returns the broker's coordinator, building it on first use: if the
__consumer_offsets topic exists its records are replayed into the coordinator, and the offsets expiry
timer starts. `start_group_coordinator(broker)` does the same at startup with the replay in the
executor, so the first group request does not pay for it. Neither creates the topic: like Kafka,
kafkad creates it when a client first needs the coordinator (`ready_coordinator`, awaited by
FindCoordinator, JoinGroup and OffsetCommit, the requests that bring groups into being), so a broker
nobody uses for groups never holds its 50 partitions. `hidden_topics` is what Metadata must not list
(the topic while it is being created).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from kafkad.coordinator.group.config import OFFSETS_TOPIC, GroupConfig
from kafkad.coordinator.group.group_coordinator import GroupCoordinator
from kafkad.coordinator.group.log_store import LogGroupStore
from kafkad.coordinator.group.store import Replayed
from kafkad.coordinator.group.timers import LoopScheduler

if TYPE_CHECKING:
    from kafkad.api.broker import Broker

log = logging.getLogger(__name__)


def group_config(broker_group: Any) -> GroupConfig:
    """The daemon's typed `config.group` (kafkad.config.broker_config.GroupConfig) -> ours."""
    return GroupConfig(
        offsets_topic_num_partitions=broker_group.offsets_topic_num_partitions,
        offsets_topic_segment_bytes=broker_group.offsets_topic_segment_bytes,
        offsets_retention_ms=broker_group.offsets_retention_ms,
        offsets_retention_check_interval_ms=broker_group.offsets_retention_check_interval_ms,
        offset_metadata_max_bytes=broker_group.offset_metadata_max_bytes,
        group_initial_rebalance_delay_ms=broker_group.initial_rebalance_delay_ms,
        group_min_session_timeout_ms=broker_group.min_session_timeout_ms,
        group_max_session_timeout_ms=broker_group.max_session_timeout_ms,
        group_max_size=broker_group.max_size,
    )


def _build(broker: Broker) -> tuple[GroupCoordinator, LogGroupStore]:
    cfg = group_config(broker.config.group)
    replicas = broker.replicas
    store = LogGroupStore(
        replicas,
        broker.clock,
        cfg.offsets_topic_num_partitions,
        cfg.offsets_topic_segment_bytes,
        cluster=not broker.config.standalone,
    )
    coordinator = GroupCoordinator(
        cfg,
        broker.clock,
        LoopScheduler(asyncio.get_running_loop()),
        store,
        partition_exists=replicas.partition_known,
    )
    coordinator.offsets_partition_count = store.num_partitions
    return coordinator, store


def coordinator_for(broker: Broker) -> GroupCoordinator:
    existing = broker.group_coordinator
    if existing is not None:
        return existing
    coordinator, store = _build(broker)
    coordinator.load(store.replay())
    coordinator.start_expiry()
    broker.group_coordinator, broker.group_store = coordinator, store
    return coordinator


async def ready_coordinator(broker: Broker) -> GroupCoordinator:
    """The coordinator once __consumer_offsets exists, creating it if needed (raises KafkaError
    COORDINATOR_NOT_AVAILABLE if that fails). Returns without suspending once the topic is there."""
    coordinator = coordinator_for(broker)
    store = broker.group_store
    assert store is not None  # coordinator_for made it
    if not store.ready:
        await store.ensure_topic()
    return coordinator


def coordinator_if_ready(broker: Broker) -> GroupCoordinator | None:
    """ready_coordinator's answer when it has one without waiting (the per-commit path), else None."""
    store = broker.group_store
    if store is None or not store.ready:
        return None
    return broker.group_coordinator


def hidden_topics(broker: Broker) -> frozenset[str]:
    """Topics Metadata must not show yet: __consumer_offsets while it is being created."""
    store = broker.group_store
    if store is None or store.ready:
        return frozenset()
    return frozenset({OFFSETS_TOPIC})


async def start_group_coordinator(broker: Broker) -> GroupCoordinator:
    existing = broker.group_coordinator
    if existing is not None:
        return existing
    coordinator, store = _build(broker)
    ends = store.log_ends()
    records: list[Replayed] = await asyncio.get_running_loop().run_in_executor(
        None, lambda: list(store.replay(upto=ends))
    )
    if broker.group_coordinator is not None:  # a request built one meanwhile
        return broker.group_coordinator
    records += store.replay(since=ends)  # appended meanwhile (a transaction marker): on the loop
    coordinator.load(records)
    coordinator.start_expiry()
    broker.group_coordinator, broker.group_store = coordinator, store
    return coordinator


def stop_group_coordinator(broker: Broker) -> None:
    store, broker.group_store = broker.group_store, None
    if store is not None:
        store.close()
    coordinator, broker.group_coordinator = broker.group_coordinator, None
    if coordinator is not None:
        coordinator.stop()
