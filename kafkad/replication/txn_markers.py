"""Writing transaction markers on partition leaders: the one function both the WriteTxnMarkers handler
and the local transaction coordinator call (Kafka's ReplicaManager.appendRecords with
AppendOrigin.COORDINATOR from KafkaApis.handleWriteTxnMarkersRequest).

A marker ends one producer's transaction on each of its partitions: a control batch (COMMIT or ABORT,
with the coordinator epoch) is appended on the partition's leader, which completes the transaction in
the partition's producer state (the last stable offset moves past it; an abort lands in `.txnindex`).
The result for every (producer_id, topic, partition) is a Kafka ErrorCode, after the marker is appended
and replicated to the ISR (acks=all), as Kafka's WriteTxnMarkers answers. For a `__consumer_offsets`
partition the group coordinator hears of it (`on_txn_marker`) once the marker is replicated (Kafka's
onTransactionCompleted in the append callback), so pending transactional offset commits become visible
(commit) or vanish (abort).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from kafkad.protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from kafkad.replication.partition import Partition

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"
# How long a marker waits for the ISR (Kafka's WriteTxnMarkers uses the request timeout of the
# coordinator's channel, request.timeout.ms 30 s by default).
REPLICATION_TIMEOUT_S = 30.0


class TxnMarker(NamedTuple):
    """One WriteTxnMarkers entry: end `producer_id`'s transaction on `partitions`."""

    producer_id: int
    producer_epoch: int
    committed: bool
    coordinator_epoch: int
    partitions: Sequence[tuple[str, int]]


MarkerResults = dict[tuple[int, str, int], ErrorCode]


async def write_markers(broker: Any, markers: Iterable[TxnMarker | tuple[Any, ...]]) -> MarkerResults:
    """Append every marker on its partitions (this broker must lead them); the error code per
    (producer_id, topic, partition): NONE, NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION,
    KAFKA_STORAGE_ERROR, INVALID_PRODUCER_EPOCH (a marker of an older producer epoch),
    TRANSACTION_COORDINATOR_FENCED (an older coordinator epoch), NOT_ENOUGH_REPLICAS(_AFTER_APPEND),
    REQUEST_TIMED_OUT (appended, not replicated in time)."""
    results: MarkerResults = {}
    waits: list[tuple[tuple[int, str, int], Partition, int]] = []
    offsets_markers: dict[tuple[int, str, int], bool] = {}  # __consumer_offsets partitions: committed
    now_ms = broker.clock.time_ms()
    for raw in markers:
        m = raw if isinstance(raw, TxnMarker) else TxnMarker(*raw)
        for topic, index in m.partitions:
            key = (m.producer_id, topic, index)
            try:
                part = broker.replicas.get_or_raise(topic, index)
                offset = part.append_txn_marker(
                    m.producer_id, m.producer_epoch, m.committed, m.coordinator_epoch, now_ms=now_ms
                )
            except (KafkaError, OSError) as exc:
                results[key] = broker.replicas.error_for(topic, index, exc).code
                continue
            results[key] = ErrorCode.NONE
            if topic == OFFSETS_TOPIC:
                offsets_markers[key] = m.committed
            if part.high_watermark <= offset:
                waits.append((key, part, offset))
    if waits:
        codes = await asyncio.gather(*(_replicated(p, o) for _, p, o in waits))
        for (key, _, _), code in zip(waits, codes, strict=True):
            results[key] = code
    # Kafka's onTransactionCompleted: only for the offsets partitions whose marker is replicated (a
    # marker that failed is resent by the coordinator, and applied then).
    for key, committed in offsets_markers.items():
        if results[key] == ErrorCode.NONE:
            _tell_group_coordinator(broker, key[2], key[0], committed)
    return results


async def _replicated(part: Partition, offset: int) -> ErrorCode:
    try:
        await asyncio.wait_for(part.wait_replicated(offset), REPLICATION_TIMEOUT_S)
    except TimeoutError:
        return ErrorCode.REQUEST_TIMED_OUT
    except KafkaError as e:
        return e.code
    return ErrorCode.NONE


def _tell_group_coordinator(broker: Any, partition: int, producer_id: int, committed: bool) -> None:
    coordinator = getattr(broker, "group_coordinator", None)
    hook = getattr(coordinator, "on_txn_marker", None)
    if hook is None:
        return
    try:
        hook(partition, producer_id, committed)
    except Exception:  # the marker is written; the group side's failure is its own to report
        log.exception("group coordinator failed to apply a transaction marker of producer %d", producer_id)
