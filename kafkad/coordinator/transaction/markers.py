"""The marker sender (Kafka's TransactionMarkerChannelManager): a commit/abort marker to every partition of a
transaction, retried until each lands.

A partition this broker leads gets its marker through txn-log's `write_markers(broker, markers)`; a
partition led elsewhere gets a WriteTxnMarkers request on a BrokerChannel to its leader (one channel per
broker, on the inter-broker listener). Per-partition answers decide, as TransactionMarkerRequestCompletionHandler
does: NONE is done; leadership/availability errors are retried after `retry_backoff_ms`; INVALID_PRODUCER_EPOCH
and TRANSACTION_COORDINATOR_FENCED mean a newer coordinator or producer epoch took over: stop; a partition
whose topic is gone is dropped. Between rounds `still_valid()` is asked: once this broker no longer
coordinates the transaction, the new coordinator resends (it loads the PrepareCommit/PrepareAbort).
"""

from __future__ import annotations

import asyncio
import importlib
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from kafkad.coordinator.transaction.coordinator import TxnMarker
from kafkad.coordinator.transaction.state import TopicPartition
from kafkad.protocol.errors import ErrorCode
from kafkad.protocol.registry import ApiKey

if TYPE_CHECKING:
    from kafkad.api.broker import Broker
    from kafkad.replication.broker_channel import BrokerChannel

log = logging.getLogger(__name__)

E = ErrorCode
RETRY_BACKOFF_S = 0.1
MAX_BACKOFF_S = 1.0
_FENCED = frozenset({E.INVALID_PRODUCER_EPOCH, E.TRANSACTION_COORDINATOR_FENCED, E.PRODUCER_FENCED})
_DROP = frozenset({E.UNSUPPORTED_FOR_MESSAGE_FORMAT, E.UNSUPPORTED_VERSION, E.INVALID_TOPIC_EXCEPTION})
WRITE_TXN_MARKERS_VERSION = 1

Results = dict[tuple[int, str, int], ErrorCode]


class BrokerMarkerSender:
    """Sends markers from this broker; on a cluster of one every partition is led here."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self._channels: dict[int, BrokerChannel] = {}
        self._warned_missing = False

    async def send(self, marker: TxnMarker, still_valid: Callable[[], bool]) -> bool:
        remaining = set(marker.partitions)
        backoff = RETRY_BACKOFF_S
        warned: set[TopicPartition] = set()
        while remaining:
            if not still_valid() or self.broker.stopping:
                return False
            local, remote, waiting = self._route(remaining)
            results: Results = {}
            calls = []
            if local:
                calls.append(self._local(marker, local, results))
            for broker_id, parts in remote.items():
                calls.append(self._remote(broker_id, marker, parts, results))
            if calls:
                await asyncio.gather(*calls)
            for tp in list(remaining):
                if tp in waiting:
                    continue
                code = results.get((marker.producer_id, tp[0], tp[1]), E.REQUEST_TIMED_OUT)
                if code is E.NONE:
                    remaining.discard(tp)
                elif code in _FENCED:
                    log.info(
                        "markers of producer %d: %s answered %s: stopping", marker.producer_id, tp, code.name
                    )
                    return False
                elif code in _DROP or (code is E.UNKNOWN_TOPIC_OR_PARTITION and not self._exists(tp)):
                    log.warning(
                        "marker of producer %d for %s-%d dropped: %s", marker.producer_id, *tp, code.name
                    )
                    remaining.discard(tp)
                elif tp not in warned:
                    warned.add(tp)
                    log.info(
                        "marker of producer %d for %s-%d: %s; retrying", marker.producer_id, *tp, code.name
                    )
            if remaining:
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, MAX_BACKOFF_S)
            else:
                backoff = RETRY_BACKOFF_S
        return True

    def _exists(self, tp: TopicPartition) -> bool:
        return self.broker.control_plane.has_partition(tp[0], tp[1])

    def _route(
        self, parts: set[TopicPartition]
    ) -> tuple[list[TopicPartition], dict[int, list[TopicPartition]], set[TopicPartition]]:
        """(led here, by remote leader, no leader known now)."""
        plane = self.broker.control_plane
        me = self.broker.broker_id
        local: list[TopicPartition] = []
        remote: dict[int, list[TopicPartition]] = {}
        waiting: set[TopicPartition] = set()
        for tp in sorted(parts):
            part = self.broker.replicas.get(tp[0], tp[1])
            if part is not None and part.is_leader:
                local.append(tp)
                continue
            leader = plane.partition_leader(tp[0], tp[1])
            if leader is None:
                local.append(tp)  # unknown everywhere: answered UNKNOWN_TOPIC_OR_PARTITION, then dropped
            elif leader < 0 or leader == me:
                waiting.add(tp)  # no leader yet, or our LeaderAndIsr is on its way
            else:
                remote.setdefault(leader, []).append(tp)
        return local, remote, waiting

    async def _local(self, marker: TxnMarker, parts: list[TopicPartition], out: Results) -> None:
        try:
            write_markers = importlib.import_module("kafkad.replication.txn_markers").write_markers
        except ImportError:  # the partition side (txn-log's) is not in this build: nothing can land yet
            if not self._warned_missing:
                self._warned_missing = True
                log.warning("no marker writer in this build (kafkad.replication.txn_markers): markers wait")
            return  # every partition unanswered: retried
        try:
            results: Results = await write_markers(self.broker, [marker._replace(partitions=parts)])
        except Exception:
            log.exception("writing markers of producer %d failed", marker.producer_id)
            return
        out.update(results)

    async def _remote(
        self, broker_id: int, marker: TxnMarker, parts: list[TopicPartition], out: Results
    ) -> None:
        channel = self.channel(broker_id)
        if channel is None:
            return
        by_topic: dict[str, list[int]] = {}
        for topic, index in parts:
            by_topic.setdefault(topic, []).append(index)
        body = {
            "markers": [
                {
                    "producer_id": marker.producer_id,
                    "producer_epoch": marker.producer_epoch,
                    "transaction_result": marker.committed,
                    "topics": [{"name": t, "partition_indexes": ps} for t, ps in by_topic.items()],
                    "coordinator_epoch": marker.coordinator_epoch,
                }
            ]
        }
        try:
            resp = await channel.request(ApiKey.WRITE_TXN_MARKERS, WRITE_TXN_MARKERS_VERSION, body)
        except (ConnectionError, TimeoutError, OSError) as e:
            log.info("WriteTxnMarkers to broker %d failed: %s; retrying", broker_id, e)
            return
        for m in resp.get("markers") or ():
            for t in m.get("topics") or ():
                for p in t.get("partitions") or ():
                    out[(m["producer_id"], t["name"], p["partition_index"])] = _code(p["error_code"])

    def channel(self, broker_id: int) -> BrokerChannel | None:
        from kafkad.replication.broker_channel import BrokerChannel

        ib = self.broker.config.security.inter_broker
        ep = self.broker.control_plane.broker_endpoint(broker_id, ib.listener if ib is not None else None)
        if ep is None:
            return None
        host, port = ep
        channel = self._channels.get(broker_id)
        if channel is None:
            channel = self._channels[broker_id] = BrokerChannel(
                host, port, client_id=f"txn-marker-sender-{self.broker.broker_id}"
            )
        else:
            channel.set_address(host, port)
        return channel

    def close(self) -> None:
        for channel in self._channels.values():
            channel.close()
        self._channels.clear()


def _code(value: int) -> ErrorCode:
    try:
        return ErrorCode(value)
    except ValueError:
        return E.UNKNOWN_SERVER_ERROR
