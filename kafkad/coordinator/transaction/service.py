"""Wiring of the transaction coordinator into a running broker.

`start_transaction_coordinator(broker)` (main, before the listeners open) builds the coordinator, its
`__transaction_state` store and marker sender, sets them as the Broker's `txn_coordinator`, `txn_store`,
`txn_markers` and `txn_verifier` (KIP-890: Produce asks it about a transactional batch for a partition not
yet in a transaction), and starts the timeout/expiration timers (`txn_timers`). Standalone it replays the
topic if it exists; in a cluster it follows the topic's leadership instead (listeners installed before any
LeaderAndIsr). What it knows of the cluster it asks `broker.control_plane`. `find_local_coordinator` (the
local plane) and `find_coordinator` (the ZooKeeper plane) answer FindCoordinator key type 1, creating the
topic on first use as Kafka does.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from kafkad.coordinator.transaction.coordinator import TransactionCoordinator, TxnConfig
from kafkad.coordinator.transaction.log_store import TxnLogStore
from kafkad.coordinator.transaction.markers import BrokerMarkerSender
from kafkad.coordinator.transaction.records import TXN_TOPIC, partition_for
from kafkad.protocol.errors import ErrorCode, KafkaError
from kafkad.protocol.registry import ApiKey

if TYPE_CHECKING:
    from kafkad.api.broker import Broker

log = logging.getLogger(__name__)

_VERIFY_ERRORS = {
    ErrorCode.PRODUCER_FENCED: ErrorCode.INVALID_PRODUCER_EPOCH,
    ErrorCode.TRANSACTION_ABORTABLE: ErrorCode.INVALID_TXN_STATE,
}


def txn_config(broker: Broker) -> TxnConfig:
    def i(name: str) -> int:
        return int(broker.config.get(name))  # type: ignore[arg-type]

    return TxnConfig(
        num_partitions=i("transaction.state.log.num.partitions"),
        max_timeout_ms=i("transaction.max.timeout.ms"),
        id_expiration_ms=i("transactional.id.expiration.ms"),
        abort_interval_ms=i("transaction.abort.timed.out.transaction.cleanup.interval.ms"),
        expire_interval_ms=i("transaction.remove.expired.transaction.cleanup.interval.ms"),
    )


def topic_configs(broker: Broker) -> dict[str, str]:
    """TransactionLog's enforced topic settings (compacted, uncompressed, no unclean election)."""
    return {
        "cleanup.policy": "compact",
        "compression.type": "uncompressed",
        "unclean.leader.election.enable": "false",
        "min.insync.replicas": str(broker.config.get("transaction.state.log.min.isr")),
        "segment.bytes": str(broker.config.get("transaction.state.log.segment.bytes")),
    }


async def start_transaction_coordinator(broker: Broker) -> TransactionCoordinator:
    cfg = txn_config(broker)
    cluster = not broker.config.standalone
    store = TxnLogStore(
        broker.replicas, broker.clock, cfg.num_partitions, topic_configs(broker), cluster=cluster
    )
    markers = BrokerMarkerSender(broker)
    coordinator = TransactionCoordinator(cfg, broker.clock, store, markers, lambda: _allocate(broker))
    store.coordinator = coordinator
    broker.txn_coordinator, broker.txn_store, broker.txn_markers = coordinator, store, markers
    broker.txn_verifier = TxnVerifierService(broker, coordinator, store, markers, cluster=cluster)
    if cluster:
        plane = broker.control_plane
        store.cluster_count = lambda: plane.partition_count(TXN_TOPIC)
        broker.replicas.add_leadership_listener(store.on_leader, store.on_follower)
    else:
        await store.start()
    loop = asyncio.get_running_loop()
    broker.txn_timers = [
        loop.create_task(
            _every(cfg.abort_interval_ms, "aborting timed-out transactions", coordinator.abort_timed_out)
        ),
        loop.create_task(
            _every(cfg.expire_interval_ms, "expiring transactional ids", coordinator.expire_ids)
        ),
    ]
    return coordinator


async def _allocate(broker: Broker) -> int:
    # broker.producer_ids is replaced in cluster mode (ZooKeeper id blocks): looked up on each call.
    pid: int = await broker.producer_ids.allocate()
    return pid


async def _every(interval_ms: int, what: str, step: Callable[[], Awaitable[int]]) -> None:
    while True:
        await asyncio.sleep(interval_ms / 1000)
        try:
            await step()
        except Exception:
            log.exception("%s failed", what)


def stop_transaction_coordinator(broker: Broker) -> None:
    timers, broker.txn_timers = broker.txn_timers, []
    for task in timers:
        task.cancel()
    coordinator, broker.txn_coordinator = broker.txn_coordinator, None
    if coordinator is not None:
        coordinator.stop()
    store, broker.txn_store = broker.txn_store, None
    if store is not None:
        store.close()
    markers, broker.txn_markers = broker.txn_markers, None
    if markers is not None:
        markers.close()
    broker.txn_verifier = None


def coordinator_of(broker: Broker) -> TransactionCoordinator:
    coordinator = broker.txn_coordinator
    if coordinator is None:
        raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, "the transaction coordinator is not running")
    return coordinator


def _running_store(broker: Broker) -> TxnLogStore:
    store = broker.txn_store
    if store is None:
        raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, "the transaction coordinator is not running")
    return store


async def find_local_coordinator(broker: Broker, listener: str | None) -> tuple[int, str, int]:
    """A cluster of one: this broker, once __transaction_state exists (created here)."""
    await _running_store(broker).ensure_topic()
    host, port = broker.advertised_host_port(listener)
    return broker.broker_id, host, port


async def find_coordinator(broker: Broker, listener: str | None, key: str) -> tuple[int, str, int]:
    """(node id, host, port) of the coordinator of transactional id `key` in a cluster: the leader of its
    __transaction_state partition in the control plane's image; KafkaError until there is one."""
    _running_store(broker)
    plane = broker.control_plane
    n = plane.partition_count(TXN_TOPIC)
    if not n:
        await _create_topic(broker)
        raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"{TXN_TOPIC} is being created")
    leader = plane.partition_leader(TXN_TOPIC, partition_for(key, n))
    ep = plane.broker_endpoint(leader, listener) if leader is not None else None
    if leader is None or ep is None:
        raise KafkaError(
            ErrorCode.COORDINATOR_NOT_AVAILABLE, "the coordinator's partition has no live leader"
        )
    return leader, ep[0], ep[1]


async def _create_topic(broker: Broker) -> None:
    """Kafka's getOrCreateInternalTopic: only once enough brokers are alive for its replication factor
    (the controller creates it after the answer)."""
    plane = broker.control_plane
    rf = int(broker.config.get("transaction.state.log.replication.factor"))  # type: ignore[arg-type]
    if plane.live_broker_count() < rf:
        return
    n = int(broker.config.get("transaction.state.log.num.partitions"))  # type: ignore[arg-type]
    try:
        await plane.create_topic(broker, TXN_TOPIC, n, rf, None, topic_configs(broker), False)
        log.info("asked the controller for topic %s (%d partitions, RF %d)", TXN_TOPIC, n, rf)
    except KafkaError as e:
        if e.code is not ErrorCode.TOPIC_ALREADY_EXISTS:
            log.info("creating %s failed: %s", TXN_TOPIC, e)


class TxnVerifierService:
    """txn-log's TxnVerifier (KIP-890): is (topic, partition) in the producer's ongoing transaction? Asked by
    Produce for a transactional batch from a producer with no transaction open on that partition. The local
    coordinator answers directly; another broker's by AddPartitionsToTxn v4 verify_only (what Kafka's
    AddPartitionsToTxnManager sends)."""

    def __init__(
        self,
        broker: Broker,
        coordinator: TransactionCoordinator,
        store: TxnLogStore,
        markers: BrokerMarkerSender,
        *,
        cluster: bool = False,
    ) -> None:
        self.broker = broker
        self.coordinator = coordinator
        self.store = store
        self.markers = markers
        self.cluster = cluster  # another broker may coordinate the transactional id

    async def verify(
        self, transactional_id: str, producer_id: int, producer_epoch: int, topic: str, partition: int
    ) -> ErrorCode:
        """As AddPartitionsToTxnManager answers the Produce: PRODUCER_FENCED becomes INVALID_PRODUCER_EPOCH
        and TRANSACTION_ABORTABLE (not in the transaction) INVALID_TXN_STATE, what producers handle."""
        tp = (topic, partition)
        if not self.cluster or self.store.error_for(transactional_id) is None:
            found = self.coordinator.verify_partitions(transactional_id, producer_id, producer_epoch, [tp])
            code = found if isinstance(found, ErrorCode) else found.get(tp, ErrorCode.TRANSACTION_ABORTABLE)
        else:
            # In its own task: a handler's coroutine is first stepped outside any task by the dispatcher,
            # and the channel's request timeout (asyncio.timeout) needs one.
            code = await asyncio.ensure_future(
                self._remote(transactional_id, producer_id, producer_epoch, tp)
            )
        return _VERIFY_ERRORS.get(code, code)

    async def _remote(self, txn_id: str, producer_id: int, epoch: int, tp: tuple[str, int]) -> ErrorCode:
        try:
            node, _host, _port = await find_coordinator(self.broker, None, txn_id)
        except KafkaError as e:
            return e.code
        channel = self.markers.channel(node)
        if channel is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        body: dict[str, Any] = {
            "transactions": [
                {
                    "transactional_id": txn_id,
                    "producer_id": producer_id,
                    "producer_epoch": epoch,
                    "verify_only": True,
                    "topics": [{"name": tp[0], "partitions": [tp[1]]}],
                }
            ]
        }
        try:
            resp = await channel.request(ApiKey.ADD_PARTITIONS_TO_TXN, 4, body)
        except (ConnectionError, TimeoutError, OSError):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if resp.get("error_code"):
            return ErrorCode(resp["error_code"])
        for txn in resp.get("results_by_transaction") or ():
            for t in txn.get("topic_results") or ():
                for p in t.get("results_by_partition") or ():
                    if t["name"] == tp[0] and p["partition_index"] == tp[1]:
                        return ErrorCode(p["partition_error_code"])
        return ErrorCode.UNKNOWN_SERVER_ERROR
